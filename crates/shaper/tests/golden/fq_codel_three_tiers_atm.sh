# options: qdisc = "fq_codel"
# options: tiers = 3
# options: down = "6mbit"
# options: up = "700kbit"
# options: link = "pppoe-llcsnap"
# unbloat plan for eth0
#   egress  eth0: htb 700kbit + fq_codel, 3 tiers, stab overhead 26 mpu 0 linklayer atm
#   ingress eth0 via ifb4eth0: htb 6mbit + fq_codel, 3 tiers, stab overhead 26 mpu 0 linklayer atm
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root handle 1: stab mtu 2047 tsize 512 mpu 0 overhead 26 linklayer atm htb default 12
class add dev eth0 parent 1: classid 1:1 htb rate 700kbit ceil 700kbit burst 1749 cburst 1749 quantum 1749
class add dev eth0 parent 1:1 classid 1:11 htb rate 175kbit ceil 700kbit burst 1749 cburst 1749 quantum 1749 prio 1
class add dev eth0 parent 1:1 classid 1:12 htb rate 481kbit ceil 700kbit burst 1749 cburst 1749 quantum 1749 prio 2
class add dev eth0 parent 1:1 classid 1:13 htb rate 43744bit ceil 700kbit burst 1749 cburst 1749 quantum 1749 prio 3
qdisc add dev eth0 parent 1:11 handle 110: fq_codel limit 1001 flows 1024 quantum 300 target 29983us interval 124983us noecn
qdisc add dev eth0 parent 1:12 handle 120: fq_codel limit 1001 flows 1024 quantum 300 target 29983us interval 124983us noecn
qdisc add dev eth0 parent 1:13 handle 130: fq_codel limit 1001 flows 1024 quantum 300 target 29983us interval 124983us noecn
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xe0 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xc0 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xb0 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0x20 0xfc flowid 1:13
filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0x04 0xfc flowid 1:13
filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xe0 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xc0 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb8 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb0 0xfc flowid 1:11
filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x20 0xfc flowid 1:13
filter add dev eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x04 0xfc flowid 1:13
qdisc add dev ifb4eth0 root handle 1: stab mtu 2047 tsize 512 mpu 0 overhead 26 linklayer atm htb default 12
class add dev ifb4eth0 parent 1: classid 1:1 htb rate 6mbit ceil 6mbit burst 1749 cburst 1749 quantum 1749
class add dev ifb4eth0 parent 1:1 classid 1:11 htb rate 1500kbit ceil 6mbit burst 1749 cburst 1749 quantum 1749 prio 1
class add dev ifb4eth0 parent 1:1 classid 1:12 htb rate 4125kbit ceil 6mbit burst 1749 cburst 1749 quantum 1749 prio 2
class add dev ifb4eth0 parent 1:1 classid 1:13 htb rate 375kbit ceil 6mbit burst 1749 cburst 1749 quantum 1749 prio 3
qdisc add dev ifb4eth0 parent 1:11 handle 110: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev ifb4eth0 parent 1:12 handle 120: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev ifb4eth0 parent 1:13 handle 130: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
filter add dev ifb4eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xe0 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xc0 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xb8 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0xb0 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0x20 0xfc flowid 1:13
filter add dev ifb4eth0 parent 1: protocol ip prio 1 u32 match ip dsfield 0x04 0xfc flowid 1:13
filter add dev ifb4eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xe0 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xc0 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb8 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0xb0 0xfc flowid 1:11
filter add dev ifb4eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x20 0xfc flowid 1:13
filter add dev ifb4eth0 parent 1: protocol ipv6 prio 2 u32 match ip6 priority 0x04 0xfc flowid 1:13
qdisc add dev eth0 handle ffff: ingress
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth0
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
