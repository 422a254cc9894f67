# options: qdisc = "fq_codel"
# options: down = "100mbit"
# options: up = "20mbit"
# options: link = "ethernet"
# unbloat plan for eth0
#   egress  eth0: htb 20mbit + fq_codel, 1 tier, stab overhead 24 mpu 84 linklayer ethernet
#   ingress eth0 via ifb4eth0: htb 100mbit + fq_codel, 1 tier, stab overhead 24 mpu 84 linklayer ethernet
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root handle 1: stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet htb default 10
class add dev eth0 parent 1: classid 1:1 htb rate 20mbit ceil 20mbit burst 2500 cburst 2500 quantum 2500
class add dev eth0 parent 1:1 classid 1:10 htb rate 20mbit ceil 20mbit burst 2500 cburst 2500 quantum 2500 prio 1
qdisc add dev eth0 parent 1:10 handle 100: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev ifb4eth0 root handle 1: stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet htb default 10
class add dev ifb4eth0 parent 1: classid 1:1 htb rate 100mbit ceil 100mbit burst 12500 cburst 12500 quantum 12500
class add dev ifb4eth0 parent 1:1 classid 1:10 htb rate 100mbit ceil 100mbit burst 12500 cburst 12500 quantum 12500 prio 1
qdisc add dev ifb4eth0 parent 1:10 handle 100: fq_codel limit 1001 flows 1024 quantum 1514 target 5ms interval 100ms ecn
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
