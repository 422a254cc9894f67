# options: qdisc = "fq_codel"
# options: up = "1mbit"
# options: link = "ethernet"
# unbloat plan for eth0
#   egress  eth0: htb 1mbit + fq_codel, 1 tier, stab overhead 24 mpu 84 linklayer ethernet
tc -batch - <<'EOF'
qdisc add dev eth0 root handle 1: stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet htb default 10
class add dev eth0 parent 1: classid 1:1 htb rate 1mbit ceil 1mbit burst 1538 cburst 1538 quantum 1538
class add dev eth0 parent 1:1 classid 1:10 htb rate 1mbit ceil 1mbit burst 1538 cburst 1538 quantum 1538 prio 1
qdisc add dev eth0 parent 1:10 handle 100: fq_codel limit 1001 flows 1024 quantum 300 target 18456us interval 113456us noecn
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 root
EOF
