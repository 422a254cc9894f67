# options: down = "6mbit"
# options: up = "700kbit"
# options: link = "pppoe-llcsnap"
# unbloat plan for eth0
#   egress  eth0: cake 700kbit besteffort triple-isolate link (pppoe-llcsnap: overhead 40 mpu 0 atm)
#   ingress eth0 via ifb4eth0: cake 6mbit besteffort triple-isolate ingress link (pppoe-llcsnap: overhead 40 mpu 0 atm)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 700kbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 40 mpu 0 atm
qdisc add dev ifb4eth0 root cake bandwidth 6mbit rtt 100ms besteffort triple-isolate nonat nowash ingress no-ack-filter split-gso overhead 40 mpu 0 atm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
