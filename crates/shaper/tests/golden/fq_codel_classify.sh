# options: qdisc = "fq_codel"
# options: down = "50mbit"
# options: up = "10mbit"
# options: classify = ["voice udp port 3074-3079"]
# unbloat plan for eth0
#   egress  eth0: htb 10mbit + fq_codel, 3 tiers, stab overhead 24 mpu 84 linklayer ethernet
#   ingress eth0 via ifb4eth0: htb 50mbit + fq_codel, 3 tiers, stab overhead 24 mpu 84 linklayer ethernet
#   classify: 1 rule, the first match wins, the download's DSCP restored by ctinfo:
#     1. voice udp port 3074-3079
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root handle 1: stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet htb default 12
class add dev eth0 parent 1: classid 1:1 htb rate 10mbit ceil 10mbit burst 1538 cburst 1538 quantum 1538
class add dev eth0 parent 1:1 classid 1:11 htb rate 2500kbit ceil 10mbit burst 1538 cburst 1538 quantum 1538 prio 1
class add dev eth0 parent 1:1 classid 1:12 htb rate 6875kbit ceil 10mbit burst 1538 cburst 1538 quantum 1538 prio 2
class add dev eth0 parent 1:1 classid 1:13 htb rate 625kbit ceil 10mbit burst 1538 cburst 1538 quantum 1538 prio 3
qdisc add dev eth0 parent 1:11 handle 110: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev eth0 parent 1:12 handle 120: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
qdisc add dev eth0 parent 1:13 handle 130: fq_codel limit 1001 flows 1024 quantum 300 target 5ms interval 100ms ecn
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
qdisc add dev ifb4eth0 root handle 1: stab mtu 2047 tsize 512 mpu 84 overhead 24 linklayer ethernet htb default 12
class add dev ifb4eth0 parent 1: classid 1:1 htb rate 50mbit ceil 50mbit burst 6250 cburst 6250 quantum 6250
class add dev ifb4eth0 parent 1:1 classid 1:11 htb rate 12500kbit ceil 50mbit burst 6250 cburst 6250 quantum 6250 prio 1
class add dev ifb4eth0 parent 1:1 classid 1:12 htb rate 34375kbit ceil 50mbit burst 6250 cburst 6250 quantum 6250 prio 2
class add dev ifb4eth0 parent 1:1 classid 1:13 htb rate 3125kbit ceil 50mbit burst 6250 cburst 6250 quantum 6250 prio 3
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
filter add dev eth0 parent ffff: protocol all prio 10 u32 match u32 0 0 action ctinfo dscp 0xfc000000 0x01000000 pipe action mirred egress redirect dev ifb4eth0
EOF
nft -f - <<'EOF'
table inet unbloat_eth0
delete table inet unbloat_eth0
table inet unbloat_eth0 {
	chain postrouting {
		type filter hook postrouting priority mangle; policy accept;
		oifname != "eth0" return
		ct mark & 0x01000000 == 0 jump rules
		ct mark & 0x01000000 == 0 jump client
		ct mark & 0xff000000 == 0xb9000000 ip dscp set ef
		ct mark & 0xff000000 == 0xb9000000 ip6 dscp set ef
		ct mark & 0xff000000 == 0x89000000 ip dscp set af41
		ct mark & 0xff000000 == 0x89000000 ip6 dscp set af41
		ct mark & 0xff000000 == 0x01000000 ip dscp set cs0
		ct mark & 0xff000000 == 0x01000000 ip6 dscp set cs0
		ct mark & 0xff000000 == 0x21000000 ip dscp set cs1
		ct mark & 0xff000000 == 0x21000000 ip6 dscp set cs1
	}
	chain rules {
		meta l4proto udp th dport 3074-3079 counter ct mark set ct mark & 0x007fffff | 0xb9000000 return comment "1 voice udp port 3074-3079"
	}
	chain client {
		ip dscp { 32, 40, 44, 46, 48, 56 } counter ct mark set ct mark & 0x007fffff | 0xbb000000 comment "no rule: the client's own mark, voice"
		ip6 dscp { 32, 40, 44, 46, 48, 56 } counter ct mark set ct mark & 0x007fffff | 0xbb000000 comment "no rule: the client's own mark, voice"
		ip dscp { 4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38 } counter ct mark set ct mark & 0x007fffff | 0x8b000000 comment "no rule: the client's own mark, video"
		ip6 dscp { 4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38 } counter ct mark set ct mark & 0x007fffff | 0x8b000000 comment "no rule: the client's own mark, video"
		ip dscp { 1, 8 } counter ct mark set ct mark & 0x007fffff | 0x23000000 comment "no rule: the client's own mark, bulk"
		ip6 dscp { 1, 8 } counter ct mark set ct mark & 0x007fffff | 0x23000000 comment "no rule: the client's own mark, bulk"
	}
}
EOF
# stop
tc -batch - <<'EOF'
qdisc del dev eth0 ingress
qdisc del dev eth0 root
EOF
ip link del dev ifb4eth0
nft -f - <<'EOF'
table inet unbloat_eth0
delete table inet unbloat_eth0
EOF
