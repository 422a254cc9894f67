# options: qdisc = "fq_codel"
# options: down = "78mbit"
# options: up = "19950kbit"
# options: link = "vdsl2"
# unbloat plan for eth0
#   egress  eth0: htb 19643kbit + fq_codel, 1 tier, stab overhead 12 mpu 64 linklayer ethernet
#   ingress eth0 via ifb4eth0: htb 76800kbit + fq_codel, 1 tier, stab overhead 12 mpu 64 linklayer ethernet
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root handle 1: stab mtu 2047 tsize 512 mpu 64 overhead 12 linklayer ethernet htb default 10
class add dev eth0 parent 1: classid 1:1 htb rate 19643kbit ceil 19643kbit burst 2455 cburst 2455 quantum 2455
class add dev eth0 parent 1:1 classid 1:10 htb rate 19643kbit ceil 19643kbit burst 2455 cburst 2455 quantum 2455 prio 1
qdisc add dev eth0 parent 1:10 handle 100: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev ifb4eth0 root handle 1: stab mtu 2047 tsize 512 mpu 64 overhead 12 linklayer ethernet htb default 10
class add dev ifb4eth0 parent 1: classid 1:1 htb rate 76800kbit ceil 76800kbit burst 9600 cburst 9600 quantum 9600
class add dev ifb4eth0 parent 1:1 classid 1:10 htb rate 76800kbit ceil 76800kbit burst 9600 cburst 9600 quantum 9600 prio 1
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
