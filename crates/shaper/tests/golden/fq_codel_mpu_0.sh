# options: qdisc = "fq_codel"
# options: down = "50mbit"
# options: up = "10mbit"
# options: link = "ethernet"
# options: mpu = 0
# unbloat plan for eth0
#   egress  eth0: htb 10mbit + fq_codel, 1 tier, stab overhead 24 mpu 0 linklayer ethernet
#   ingress eth0 via ifb4eth0: htb 50mbit + fq_codel, 1 tier, stab overhead 24 mpu 0 linklayer ethernet
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root handle 1: stab mpu 0 overhead 24 linklayer ethernet htb default 10
class add dev eth0 parent 1: classid 1:1 htb rate 10mbit ceil 10mbit burst 1538 cburst 1538 quantum 1538
class add dev eth0 parent 1:1 classid 1:10 htb rate 10mbit ceil 10mbit burst 1538 cburst 1538 quantum 1538 prio 1
qdisc add dev eth0 parent 1:10 handle 100: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev ifb4eth0 root handle 1: stab mpu 0 overhead 24 linklayer ethernet htb default 10
class add dev ifb4eth0 parent 1: classid 1:1 htb rate 50mbit ceil 50mbit burst 6250 cburst 6250 quantum 6250
class add dev ifb4eth0 parent 1:1 classid 1:10 htb rate 50mbit ceil 50mbit burst 6250 cburst 6250 quantum 6250 prio 1
qdisc add dev ifb4eth0 parent 1:10 handle 100: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
