# options: down = "78mbit"
# options: up = "19950kbit"
# options: extra-egress = "nat dual-srchost ack-filter mpu 64"
# options: extra-ingress = "nat dual-dsthost wash besteffort"
# unbloat plan for eth0
#   egress  eth0: cake 19950kbit besteffort dual-srchost nat ack-filter link (ethernet: overhead 38 mpu 64 none)
#   ingress eth0 via ifb4eth0: cake 78mbit besteffort dual-dsthost nat ingress link (ethernet: overhead 38 mpu 84 none)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 19950kbit rtt 100ms besteffort dual-srchost nat nowash egress ack-filter split-gso overhead 38 mpu 64 noatm
qdisc add dev ifb4eth0 root cake bandwidth 78mbit rtt 100ms besteffort dual-dsthost nat wash ingress no-ack-filter split-gso overhead 38 mpu 84 noatm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
