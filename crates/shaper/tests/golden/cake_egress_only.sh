# options: up = "10mbit"
# options: down = 0
# unbloat plan for eth0
#   egress  eth0: cake 10mbit besteffort triple-isolate link (ethernet: overhead 38 mpu 84 none)
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 10mbit rtt 100ms besteffort triple-isolate nonat nowash egress no-ack-filter split-gso overhead 38 mpu 84 noatm
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 root
EOF
