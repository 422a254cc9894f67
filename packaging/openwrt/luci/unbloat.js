'use strict';
'require view';
'require form';
'require rpc';
'require ui';

// luci-app-unbloat: the form for /etc/config/unbloat. Written from unbloat's option declarations
// (crates/shaper/src/options/luci.rs); do not edit it by hand.

var callImport = rpc.declare({
	object: 'luci.unbloat',
	method: 'import_sqm',
	expect: { '': {} }
});

var callImportApply = rpc.declare({
	object: 'luci.unbloat',
	method: 'import_sqm_apply',
	params: [ 'digest' ],
	expect: { '': {} }
});

// Import from SQM: what `unbloat config import-sqm /etc/config/sqm --uci` would write, beside the
// file it replaces and the notes on what did not carry over as it was. Nothing is written before
// Apply, which writes it only if neither file changed since this preview (the plugin compares a
// digest of both) and reloads the service.
function importSqm() {
	return callImport().then(function(r) {
		if (r.error)
			return ui.addNotification(null, E('p', {}, r.error), 'warning');
		var notes = (r.import.notes || []).filter(function(n) { return n.kind != 'mapped'; });
		ui.showModal(_('Import from SQM'), [
			E('p', {}, _('Apply replaces /etc/config/unbloat with this, and reloads the service:')),
			E('pre', {}, r.import.toml),
			E('ul', {}, notes.map(function(n) {
				return E('li', {}, [ n.kind, n.queue, n.option ].filter(Boolean).join(', ') + ': ' + n.text);
			})),
			r.sqm_enabled ? E('p', { 'class': 'alert-message warning' },
				_('sqm is enabled: unbloat refuses a device that sqm shapes. Stop and disable sqm (System, Startup).')) : E([]),
			E('p', {}, r.current == null ? _('There is no /etc/config/unbloat yet.') : _('It replaces:')),
			r.current == null ? E([]) : E('pre', {}, r.current),
			E('div', { 'class': 'right' }, [
				E('button', { 'class': 'btn', 'click': ui.hideModal }, _('Cancel')), ' ',
				E('button', { 'class': 'btn cbi-button-action', 'click': ui.createHandlerFn(null, function() {
					return callImportApply(r.digest).then(function(a) {
						ui.hideModal();
						if (a.error)
							return ui.addNotification(null, E('p', {}, a.error), 'warning');
						location.reload();
					});
				}) }, _('Apply'))
			])
		]);
	});
}

return view.extend({
	render: function() {
		var m, s, o;

		m = new form.Map('unbloat', _('Smart Queue Management (unbloat)'),
			_('A section per device to shape. Rates need their unit (78mbit, 19950kbit). An empty field keeps the default. Save & Apply reloads the service: a value it refuses leaves the shaping as it was, and the system log says why.'));

		s = m.section(form.TypedSection, 'interface', _('Interfaces'));
		s.addremove = true;
		s.anonymous = false;
		s.tab('basic', _('Basic settings'));
		s.tab('more', _('More options'));

		o = s.taboption('basic', form.Flag, 'enabled', _('Enabled'));
		o.default = '0';
		o.rmempty = false;

		o = s.taboption('basic', form.Value, 'interface', _('Interface'));
		o.description = _('The device to shape: the WAN device, as `ip link` names it (pppoe-wan, eth1).');
		o.rmempty = false;

		o = s.taboption('basic', form.Value, "down", _("down"));
		o.description = _("download shaper rate with its unit, e.g. 78mbit");
		o.placeholder = "30mbit";
		o.rmempty = true;

		o = s.taboption('basic', form.Value, "up", _("up"));
		o.description = _("upload shaper rate with its unit, e.g. 19950kbit");
		o.placeholder = "5mbit";
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "qdisc", _("qdisc"));
		o.description = _("cake, or HTB + fq_codel");
		o.value('', _('default'));
		o.value("cake", "cake");
		o.value("fq_codel", "fq_codel");
		o.rmempty = true;

		o = s.taboption('more', form.Value, "tiers", _("tiers"));
		o.description = _("fq_codel: 1 or 3 classes");
		o.placeholder = "3";
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "link", _("link"));
		o.description = _("the link's framing and overhead (man tc-cake)");
		o.value('', _('default'));
		o.value("ethernet", "ethernet");
		o.value("ether-vlan", "ether-vlan");
		o.value("docsis", "docsis");
		o.value("vdsl2", "vdsl2");
		o.value("bridged-ptm", "bridged-ptm");
		o.value("pppoe-ptm", "pppoe-ptm");
		o.value("ipoa-vcmux", "ipoa-vcmux");
		o.value("ipoa-llcsnap", "ipoa-llcsnap");
		o.value("bridged-vcmux", "bridged-vcmux");
		o.value("bridged-llcsnap", "bridged-llcsnap");
		o.value("pppoa-vcmux", "pppoa-vcmux");
		o.value("pppoa-llc", "pppoa-llc");
		o.value("pppoe-vcmux", "pppoe-vcmux");
		o.value("pppoe-llcsnap", "pppoe-llcsnap");
		o.value("conservative", "conservative");
		o.value("raw", "raw");
		o.value("none", "none");
		o.rmempty = true;

		o = s.taboption('more', form.Value, "overhead", _("overhead"));
		o.description = _("bytes per packet, -64..256");
		o.placeholder = "26";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "mpu", _("mpu"));
		o.description = _("minimum packet unit, bytes, 0..256");
		o.placeholder = "72";
		o.rmempty = true;

		o = s.taboption('more', form.ListValue, "framing", _("framing"));
		o.description = _("cell framing");
		o.value('', _('default'));
		o.value("none", "none");
		o.value("atm", "atm");
		o.value("ptm", "ptm");
		o.rmempty = true;

		o = s.taboption('more', form.Value, "vlan", _("vlan"));
		o.description = _("extra 802.1Q tags, 0..2");
		o.placeholder = "1";
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "isolation", _("isolation"));
		o.description = _("flow isolation; dual-host: fair between LAN hosts");
		o.value('', _('default'));
		o.value("flows", "flows");
		o.value("hosts", "hosts");
		o.value("srchost", "srchost");
		o.value("dsthost", "dsthost");
		o.value("dual-host", "dual-host");
		o.value("dual-srchost", "dual-srchost");
		o.value("dual-dsthost", "dual-dsthost");
		o.value("triple-isolate", "triple-isolate");
		o.value("flowblind", "flowblind");
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "nat", _("nat"));
		o.description = _("look up NAT to see LAN hosts");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "diffserv", _("diffserv"));
		o.description = _("cake's DSCP tins");
		o.value('', _('default'));
		o.value("besteffort", "besteffort");
		o.value("diffserv3", "diffserv3");
		o.value("diffserv4", "diffserv4");
		o.value("diffserv8", "diffserv8");
		o.value("precedence", "precedence");
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "wash", _("wash"));
		o.description = _("clear DSCP marks");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('basic', form.ListValue, "ack_filter", _("ack-filter"));
		o.description = _("cake's ACK filter (upload)");
		o.value('', _('default'));
		o.value("true", "true");
		o.value("false", "false");
		o.value("aggressive", "aggressive");
		o.rmempty = true;

		o = s.taboption('more', form.Value, "rtt", _("rtt"));
		o.description = _("cake's rtt: a time (100ms) or a name (internet)");
		o.placeholder = "50ms";
		o.rmempty = true;

		o = s.taboption('more', form.ListValue, "ingress_keyword", _("ingress-keyword"));
		o.description = _("cake's ingress mode on the IFB");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('more', form.ListValue, "split_gso", _("split-gso"));
		o.description = _("cake's split-gso");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('more', form.Value, "memlimit", _("memlimit"));
		o.description = _("cake's memory limit, e.g. 32mb");
		o.placeholder = "32mb";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "fwmark", _("fwmark"));
		o.description = _("cake's tin by firewall mark: a mask, e.g. 0xff");
		o.placeholder = "0xff";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "target", _("target"));
		o.description = _("fq_codel's target, e.g. 5ms");
		o.placeholder = "10ms";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "interval", _("interval"));
		o.description = _("fq_codel's interval, e.g. 100ms");
		o.placeholder = "150ms";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "quantum", _("quantum"));
		o.description = _("fq_codel's quantum, bytes");
		o.placeholder = "1000";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "limit", _("limit"));
		o.description = _("fq_codel's packet limit");
		o.placeholder = "2000";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "flows", _("flows"));
		o.description = _("fq_codel's flows");
		o.placeholder = "2048";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "memory_limit", _("memory-limit"));
		o.description = _("fq_codel's memory limit");
		o.placeholder = "16mb";
		o.rmempty = true;

		o = s.taboption('more', form.ListValue, "ecn_egress", _("ecn-egress"));
		o.description = _("fq_codel: ECN upload");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('more', form.ListValue, "ecn_ingress", _("ecn-ingress"));
		o.description = _("fq_codel: ECN download");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('more', form.Value, "eqdisc_opts", _("extra-egress"));
		o.description = _("more options for the upload qdisc, in its words");
		o.placeholder = "wash";
		o.rmempty = true;

		o = s.taboption('more', form.Value, "iqdisc_opts", _("extra-ingress"));
		o.description = _("more options for the download qdisc");
		o.placeholder = "ack-filter";
		o.rmempty = true;

		o = s.taboption('more', form.ListValue, "i_mean_it", _("i-mean-it"));
		o.description = _("confirm rates that could cut you off");
		o.value('', _('default'));
		o.value("1", "on");
		o.value("0", "off");
		o.rmempty = true;

		o = s.taboption('more', form.DynamicList, "classify", _("classify"));
		o.description = _("classification rules and presets");
		o.placeholder = "gaming";
		o.rmempty = true;

		// Above the form: sqm's settings, imported through the rpcd plugin (importSqm above).
		return m.render().then(function(map) {
			return E([], [ E('div', { 'class': 'cbi-section' }, [
				E('p', {}, _('Coming from sqm-scripts? Preview what its settings (/etc/config/sqm) become here: nothing is written until you apply them.')),
				E('button', { 'class': 'cbi-button cbi-button-action', 'click': ui.createHandlerFn(null, importSqm) }, _('Import from SQM...'))
			]), map ]);
		});
	}
});
