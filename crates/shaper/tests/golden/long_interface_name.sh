# options: down = "100mbit"
# options: up = "40mbit"
# options: link = "docsis"
# unbloat plan for enx00e04c680123
#   egress  enx00e04c680123: cake 40mbit besteffort triple-isolate link (docsis: overhead 18 mpu 64 none)
#   ingress enx00e04c680123 via ifb4enx0-c675a4: cake 100mbit besteffort triple-isolate ingress link (docsis: overhead 18 mpu 64 none)
ip link add name ifb4enx0-c675a4 type ifb
ip link set dev ifb4enx0-c675a4 up
tc -batch - <<'EOF'
qdisc add dev enx00e04c680123 root cake bandwidth 40mbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 18 mpu 64 noatm
qdisc add dev ifb4enx0-c675a4 root cake bandwidth 100mbit rtt 100ms besteffort triple-isolate nonat nowash ingress no-ack-filter split-gso overhead 18 mpu 64 noatm
qdisc add dev enx00e04c680123 handle ffff: ingress
filter add dev enx00e04c680123 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4enx0-c675a4
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev enx00e04c680123 ingress
qdisc del dev enx00e04c680123 root
EOF
ip link del dev ifb4enx0-c675a4
