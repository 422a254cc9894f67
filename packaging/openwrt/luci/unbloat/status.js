'use strict';
'require view';
'require poll';
'require rpc';
'require dom';

// luci-app-unbloat's status: each shaped device, each direction, each of cake's tins, as
// `unbloat status --json` reads them from the kernel, through rpcd's exec plugin
// (/usr/libexec/rpcd/luci.unbloat, whose one method the ACL grants). Refreshed every 5 s, LuCI's
// own poll interval: one `unbloat status` per refresh. Drops and marks count since the shaping
// began; the column beside each says how many came since the last refresh.

var callStatus = rpc.declare({
	object: 'luci.unbloat',
	method: 'status',
	expect: { '': {} }
});

// The counters of the last refresh, by device, direction and tin: the "since" columns.
var last = {};

function ms(us) {
	return (us / 1000).toFixed(1) + ' ms';
}

function rate(bps) {
	return bps >= 1e6 ? (bps / 1e6).toFixed(2) + ' Mbit/s' : (bps / 1e3).toFixed(0) + ' kbit/s';
}

function since(key, now) {
	var before = last[key];
	last[key] = now;
	return (before == null || now < before) ? '' : ' (+' + (now - before) + ')';
}

function row(cells, head) {
	return E('tr', { 'class': head ? 'tr table-titles' : 'tr' }, cells.map(function(c) {
		return E(head ? 'th' : 'td', { 'class': head ? 'th' : 'td' }, c);
	}));
}

// One direction of one device: cake's tins, or the qdisc's own counters (HTB + fq_codel).
function direction(dev, side) {
	var q = dev[side];
	if (!q)
		return E([]);
	var sh = q.shaper || {};
	var title = E('h4', {}, [ q.direction, ': ', q.qdisc, ' on ', q.device,
		sh.bandwidth_bps ? ', ' + rate(sh.bandwidth_bps) : '' ]);
	var key = dev.device + '/' + side;
	if (!sh.tins)
		return E([], [ title, E('table', { 'class': 'table' }, [
			row([ _('Sent'), _('Drops'), _('Backlog') ], true),
			row([ q.sent_packets + ' ' + _('packets'), q.drops + since(key, q.drops), q.backlog_bytes + ' B' ])
		]) ]);
	return E([], [ title, E('table', { 'class': 'table' }, [
		row([ _('Tin'), _('Delay (average)'), _('Delay (peak)'), _('Delay (sparse flows)'),
			_('Drops'), _('ECN marks'), _('Backlog'), _('Flows (sparse/bulk)') ], true)
	].concat(sh.tins.map(function(t) {
		var k = key + '/' + t.name;
		return row([ t.name, ms(t.avg_delay_us), ms(t.peak_delay_us), ms(t.sparse_delay_us),
			t.drops + since(k + '/drops', t.drops), t.ecn_marks + since(k + '/marks', t.ecn_marks),
			t.backlog_bytes + ' B', t.sparse_flows + '/' + t.bulk_flows ]);
	}))) ]);
}

function draw(status) {
	var list = status.interfaces || [];
	if (status.exit)
		return E('p', { 'class': 'alert-message warning' },
			_('unbloat status failed: the system log (logread) says why.'));
	if (!list.length)
		return E('p', {}, _('Nothing is shaped: enable a device on the settings page.'));
	return E([], list.map(function(dev) {
		return E('div', { 'class': 'cbi-section' }, [
			E('h3', {}, dev.summary || dev.device),
			direction(dev, 'egress'),
			direction(dev, 'ingress')
		]);
	}));
}

return view.extend({
	load: function() {
		return callStatus();
	},

	render: function(status) {
		var body = E('div', { 'id': 'unbloat-status' }, draw(status));
		poll.add(function() {
			return callStatus().then(function(s) {
				dom.content(body, draw(s));
			});
		}, 5);
		return E([], [
			E('h2', {}, _('Smart Queue Management (unbloat): status')),
			E('div', { 'class': 'cbi-map-descr' },
				_('The queue delay of each tin, as cake measures it: low under load means no bufferbloat. Refreshed every 5 seconds.')),
			body
		]);
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
