# options: down = "500mbit"
# options: up = "500mbit"
# options: link = "ethernet"
# unbloat plan for eth0
#   egress  eth0: cake 500mbit besteffort triple-isolate link (ethernet: overhead 38 mpu 84 none)
#   ingress eth0 via ifb4eth0: cake 500mbit besteffort triple-isolate ingress link (ethernet: overhead 38 mpu 84 none)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 500mbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 38 mpu 84 noatm
qdisc add dev ifb4eth0 root cake bandwidth 500mbit rtt 100ms besteffort triple-isolate nonat nowash ingress no-ack-filter split-gso overhead 38 mpu 84 noatm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
