# options: down = "100mbit"
# options: up = "10mbit"
# options: link = "docsis"
# options: diffserv = "diffserv4"
# options: ack-filter = true
# unbloat plan for eth0
#   egress  eth0: cake 10mbit diffserv4 triple-isolate ack-filter link (docsis: overhead 18 mpu 64 none)
#   ingress eth0 via ifb4eth0: cake 100mbit diffserv4 triple-isolate ingress link (docsis: overhead 18 mpu 64 none)
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 10mbit rtt 100ms diffserv4 triple-isolate nonat nowash egress ack-filter split-gso overhead 18 mpu 64 noatm
qdisc add dev ifb4eth0 root cake bandwidth 100mbit rtt 100ms diffserv4 triple-isolate nonat nowash ingress no-ack-filter split-gso overhead 18 mpu 64 noatm
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
