# options: down = "760kbit"
# options: up = "209kbit"
# options: link = "pppoa-vcmux"
# unbloat plan for eth0
#   egress  eth0: cake 209kbit besteffort triple-isolate link (pppoa-vcmux: overhead 10 mpu 0 atm)
#   ingress eth0 via ifb4eth0: cake 760kbit besteffort triple-isolate link (pppoa-vcmux: overhead 10 mpu 0 atm)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 209kbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 10 mpu 0 atm
qdisc add dev ifb4eth0 root cake bandwidth 760kbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 10 mpu 0 atm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
