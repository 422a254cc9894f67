# options: down = "78mbit"
# options: up = "19950kbit"
# options: link = "vdsl2"
# unbloat plan for eth0
#   egress  eth0: cake 19950kbit besteffort triple-isolate link (vdsl2: overhead 26 mpu 64 ptm)
#   ingress eth0 via ifb4eth0: cake 78mbit besteffort triple-isolate ingress link (vdsl2: overhead 26 mpu 64 ptm)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 19950kbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 26 mpu 64 ptm
qdisc add dev ifb4eth0 root cake bandwidth 78mbit rtt 100ms besteffort triple-isolate nonat nowash ingress no-ack-filter split-gso overhead 26 mpu 64 ptm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
