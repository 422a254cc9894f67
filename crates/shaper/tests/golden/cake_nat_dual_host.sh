# options: down = "78mbit"
# options: up = "19950kbit"
# options: link = "bridged-ptm"
# options: vlan = 1
# options: mpu = 72
# options: isolation = "dual-host"
# options: nat = true
# unbloat plan for eth0
#   egress  eth0: cake 19950kbit besteffort dual-srchost nat link (bridged-ptm: overhead 26 mpu 72 ptm)
#   ingress eth0 via ifb4eth0: cake 78mbit besteffort dual-dsthost nat ingress link (bridged-ptm: overhead 26 mpu 72 ptm)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 19950kbit rtt 100ms besteffort dual-srchost nat nowash egress no-ack-filter split-gso overhead 26 mpu 72 ptm
qdisc add dev ifb4eth0 root cake bandwidth 78mbit rtt 100ms besteffort dual-dsthost nat nowash ingress no-ack-filter split-gso overhead 26 mpu 72 ptm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
