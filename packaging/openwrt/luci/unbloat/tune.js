'use strict';
'require view';
'require rpc';
'require uci';
'require ui';
'require poll';
'require dom';

// luci-app-unbloat's tune: `unbloat tune DEVICE` from the router to a far end, through rpcd's exec
// plugin (/usr/libexec/rpcd/luci.unbloat), as the Test tab runs a test: tune_start starts it in
// the background and returns at once, the page asks tune_status every 3 s for its phase, and
// Cancel stops it (tune_cancel: tune puts the old shaping back first). Without --apply, tune puts
// the old shaping back at its end too; what it found (the rates and the link options) is shown,
// and "Use these settings" writes them into the device's section as unsaved changes and applies
// them as Save & Apply does (with LuCI's rollback if the router stops answering). The plugin
// checks every argument; this page only passes on what it says.

var callStart = rpc.declare({
	object: 'luci.unbloat',
	method: 'tune_start',
	params: [ 'device', 'server' ],
	expect: { '': {} }
});

var callCancel = rpc.declare({
	object: 'luci.unbloat',
	method: 'tune_cancel',
	expect: { '': {} }
});

var callTuneStatus = rpc.declare({
	object: 'luci.unbloat',
	method: 'tune_status',
	expect: { '': {} }
});

// The link options a tune decides: those it leaves out of its result are removed from the section
// (an old preset beside a measured overhead would say two things).
var LINK = [ 'link', 'overhead', 'mpu', 'framing' ];

function row(label, value) {
	return E('tr', { 'class': 'tr' }, [
		E('td', { 'class': 'td left', 'width': '33%' }, label),
		E('td', { 'class': 'td left' }, value)
	]);
}

// The section of /etc/config/unbloat that shapes `device`, if there is one.
function sectionOf(device) {
	return uci.sections('unbloat', 'interface').filter(function(s) { return s.interface == device; })[0];
}

// The result's options as UCI options: unbloat.toml's keys with `_` for `-`, values as text.
function uciOptions(options) {
	var out = {};
	Object.keys(options || {}).forEach(function(k) {
		var v = options[k];
		if (v != null && typeof v != 'object')
			out[k.replace(/-/g, '_')] = String(v);
	});
	return out;
}

function use(st) {
	var s = sectionOf(st.device);
	if (!s) {
		ui.addNotification(null, E('p', {}, _('No section of the settings shapes %s: add one on the Settings tab first.').format(st.device)), 'warning');
		return Promise.resolve();
	}
	var found = uciOptions(st.result.options);
	LINK.forEach(function(k) {
		if (found[k] == null)
			uci.unset('unbloat', s['.name'], k);
	});
	Object.keys(found).forEach(function(k) {
		uci.set('unbloat', s['.name'], k, found[k]);
	});
	return uci.save().then(function() {
		return ui.changes.apply(true);
	});
}

function figures(st) {
	var r = st.result, found = uciOptions(r.options);
	return E('table', { 'class': 'table' }, [
		row(_('Download rate'), r.down || _('none found')),
		row(_('Upload rate'), r.up || _('none found')),
		row(_('Link options'), LINK.filter(function(k) { return found[k] != null; })
			.map(function(k) { return k + ' ' + found[k]; }).join(', ') || '-'),
		row(_('Took'), Math.round(r.seconds) + ' s'),
		row(_('Afterwards'), r.ending || '-')
	]);
}

function draw(st) {
	if (st.error && st.state == null)
		return E('p', { 'class': 'alert-message warning' }, st.error);
	if (st.state == 'none')
		return E('p', {}, _('No tune has run since the router started.'));
	var head = E('p', {}, _('Tune of %s against %s.').format(st.device, st.server));
	if (st.state == 'running') {
		var pct = st.phases ? Math.round(100 * (st.phase - 1) / st.phases) : 0;
		return E([], [ head,
			E('div', { 'class': 'cbi-progressbar', 'title': pct + '%' }, E('div', { 'style': 'width:' + pct + '%' })),
			E('p', {}, st.phases ? _('Phase %d of %d').format(st.phase, st.phases) : _('Starting...')),
			st.progress ? E('pre', {}, st.progress) : E([])
		]);
	}
	if (st.state == 'lost')
		return E([], [ head, E('p', { 'class': 'alert-message warning' }, st.error) ]);
	if (st.state == 'cancelled')
		return E([], [ head, E('p', {}, _('The tune was cancelled; the shaping from before it is back.')) ]);
	if (st.exit != 0 || !st.result)
		return E([], [ head, E('p', { 'class': 'alert-message warning' }, [
			_('The tune failed (exit status %d):').format(st.exit), E('pre', {}, st.error || '')
		]) ]);
	var apply = E('button', { 'class': 'cbi-button cbi-button-apply' }, _('Use these settings'));
	apply.addEventListener('click', ui.createHandlerFn(null, function() { return use(st); }));
	return E([], [ head, figures(st),
		E('p', {}, sectionOf(st.device)
			? _('Use these settings writes them into the section for %s and applies them.').format(st.device)
			: _('No section of the settings shapes %s: add one on the Settings tab to use these.').format(st.device)),
		E('div', { 'class': 'cbi-page-actions' }, apply)
	]);
}

return view.extend({
	load: function() {
		return Promise.all([ callTuneStatus(), uci.load('unbloat') ]);
	},

	render: function(data) {
		var st = data[0];
		var box = E('div', { 'id': 'unbloat-tune' });
		var devices = uci.sections('unbloat', 'interface').map(function(s) { return s.interface; })
			.filter(function(d, i, all) { return d && all.indexOf(d) == i; });
		var device = E('select', { 'class': 'cbi-input-select' }, devices.map(function(d) {
			return E('option', { 'value': d }, d);
		}));
		var server = E('input', { 'class': 'cbi-input-text', 'type': 'text', 'placeholder': 'unbloat.example.net:4420' });
		var start = E('button', { 'class': 'cbi-button cbi-button-action' }, _('Start the tune'));
		var cancel = E('button', { 'class': 'cbi-button cbi-button-negative', 'style': 'display:none' }, _('Cancel the tune'));
		var running = function(yes) {
			start.disabled = yes || !devices.length;
			cancel.style.display = yes ? '' : 'none';
		};

		// While a tune runs: its status every 3 s, then the result once, and no more polls.
		var watch = function() {
			return callTuneStatus().then(function(s) {
				dom.content(box, draw(s));
				running(s.state == 'running');
				if (s.state != 'running')
					poll.remove(watch);
			});
		};

		start.addEventListener('click', ui.createHandlerFn(this, function() {
			return callStart(device.value, server.value.trim()).then(function(r) {
				if (r.error) {
					ui.addNotification(null, E('p', {}, r.error), 'warning');
					return;
				}
				running(true);
				poll.add(watch, 3);
				return watch();
			});
		}));

		cancel.addEventListener('click', ui.createHandlerFn(this, function() {
			return callCancel().then(function(r) {
				if (r.error)
					ui.addNotification(null, E('p', {}, r.error), 'warning');
				return watch();
			});
		}));

		dom.content(box, draw(st));
		running(st.state == 'running');
		if (st.state == 'running')
			poll.add(watch, 3);
		return E([], [
			E('h2', {}, _('Smart Queue Management (unbloat): tune')),
			E('div', { 'class': 'cbi-map-descr' },
				_("Finds the link's framing and the shaper rates that keep latency under load low, by measuring it against a far end running `unbloat serve`. It saturates the link for about 3 minutes (up to 6 on a slow line) and shapes at trial rates meanwhile; then it puts the shaping from before back, and shows what it found.")),
			E('div', { 'class': 'cbi-section' }, [
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title' }, _('Device')),
					E('div', { 'class': 'cbi-value-field' }, [ device, E('div', { 'class': 'cbi-value-description' },
						devices.length ? _('A device of a section on the Settings tab') : _('Add a section on the Settings tab first')) ]) ]),
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title' }, _('Far end')),
					E('div', { 'class': 'cbi-value-field' }, [ server, E('div', { 'class': 'cbi-value-description' },
						_('HOST, HOST:PORT or unbloat://HOST:PORT: a far end running `unbloat serve`')) ]) ]),
				E('div', { 'class': 'cbi-page-actions' }, [ start, ' ', cancel ])
			]),
			E('div', { 'class': 'cbi-section' }, [ E('h3', {}, _('Last tune')), box ])
		]);
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
