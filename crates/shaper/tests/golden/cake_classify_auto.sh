# options: down = "50mbit"
# options: up = "10mbit"
# options: link = "vdsl2"
# options: classify = ["auto bulk-pps 200"]
# unbloat plan for eth0
#   egress  eth0: cake 10mbit diffserv4 triple-isolate link (vdsl2: overhead 26 mpu 64 ptm)
#   ingress eth0 via ifb4eth0: cake 50mbit diffserv4 triple-isolate ingress link (vdsl2: overhead 26 mpu 64 ptm)
#   classify: automatic classes only, the download's DSCP restored by ctinfo:
#     auto: bulk, past 200 packets/s one way for 5 s
#     auto: video, at most 500 bytes a packet on average
ip link add name ifb4eth0 type ifb
ip link set dev ifb4eth0 up
tc -batch - <<'EOF'
qdisc add dev eth0 root cake bandwidth 10mbit rtt 100ms diffserv4 triple-isolate nonat nowash egress no-ack-filter split-gso overhead 26 mpu 64 ptm
qdisc add dev ifb4eth0 root cake bandwidth 50mbit rtt 100ms diffserv4 triple-isolate nonat nowash ingress no-ack-filter split-gso overhead 26 mpu 64 ptm
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
		ct mark & 0x01800000 != 0x01000000 jump auto_up
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
	}
	chain client {
		ip dscp { 32, 40, 44, 46, 48, 56 } counter ct mark set ct mark & 0x007fffff | 0xbb000000 comment "no rule: the client's own mark, voice"
		ip6 dscp { 32, 40, 44, 46, 48, 56 } counter ct mark set ct mark & 0x007fffff | 0xbb000000 comment "no rule: the client's own mark, voice"
		ip dscp { 4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38 } counter ct mark set ct mark & 0x007fffff | 0x8b000000 comment "no rule: the client's own mark, video"
		ip6 dscp { 4, 16, 18, 20, 22, 24, 26, 28, 30, 34, 36, 38 } counter ct mark set ct mark & 0x007fffff | 0x8b000000 comment "no rule: the client's own mark, video"
		ip dscp { 1, 8 } counter ct mark set ct mark & 0x007fffff | 0x23000000 comment "no rule: the client's own mark, bulk"
		ip6 dscp { 1, 8 } counter ct mark set ct mark & 0x007fffff | 0x23000000 comment "no rule: the client's own mark, bulk"
	}
	set auto_up {
		typeof ct id
		size 65535
		flags dynamic,timeout
		timeout 60s
	}
	set auto_down {
		typeof ct id
		size 65535
		flags dynamic,timeout
		timeout 60s
	}
	chain prerouting {
		type filter hook prerouting priority mangle; policy accept;
		iifname != "eth0" return
		ct mark & 0x01800000 != 0x01000000 jump auto_down
	}
	chain auto_up {
		ct mark & 0xfd800000 == 0x21800000 return
		update @auto_up { ct id limit rate over 200/second burst 1000 packets } counter ct mark set ct mark & 0x007fffff | 0x21800000 comment "auto: bulk, past 200 packets/s one way for 5 s"
		ct mark & 0x01000000 == 0 ct packets >= 20 ct avgpkt <= 500 counter ct mark set ct mark & 0x007fffff | 0x89800000 comment "auto: video, at most 500 bytes a packet on average"
	}
	chain auto_down {
		ct mark & 0xfd800000 == 0x21800000 return
		update @auto_down { ct id limit rate over 200/second burst 1000 packets } counter ct mark set ct mark & 0x007fffff | 0x21800000 comment "auto: bulk, past 200 packets/s one way for 5 s"
		ct mark & 0x01000000 == 0 ct packets >= 20 ct avgpkt <= 500 counter ct mark set ct mark & 0x007fffff | 0x89800000 comment "auto: video, at most 500 bytes a packet on average"
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
