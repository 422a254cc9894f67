'use strict';
'require view';
'require rpc';
'require ui';
'require poll';
'require dom';

// luci-app-unbloat's test: `unbloat test` from the router to a far end, through rpcd's exec plugin
// (/usr/libexec/rpcd/luci.unbloat). test_start starts it in the background and returns at once
// (rpcd would kill a call that took the test's length); the page then asks test_status every
// 2 s for its progress, and once it has finished shows the grade, the latency under load and the
// goodput, and the plots, each fetched as SVG text (test_plot) and shown as an image: an <img>
// runs no script, whatever the file holds. While it runs, Cancel stops it (test_cancel). The
// plugin checks every argument; this page only passes on what it says.

var callStart = rpc.declare({
	object: 'luci.unbloat',
	method: 'test_start',
	params: [ 'server', 'profile', 'duration' ],
	expect: { '': {} }
});

var callCancel = rpc.declare({
	object: 'luci.unbloat',
	method: 'test_cancel',
	expect: { '': {} }
});

var callTestStatus = rpc.declare({
	object: 'luci.unbloat',
	method: 'test_status',
	expect: { '': {} }
});

var callPlot = rpc.declare({
	object: 'luci.unbloat',
	method: 'test_plot',
	params: [ 'name' ],
	expect: { '': {} }
});

// `unbloat test --profile`'s choices, as the plugin accepts them.
var PROFILES = [ 'rrul', 'rrul_be', 'download', 'upload', 'bidir', 'tcp_ndown', 'tcp_nup', 'ping' ];

function ms(v) {
	return v == null ? '-' : v.toFixed(1) + ' ms';
}

function rate(bps) {
	return bps == null ? '-' : (bps / 1e6).toFixed(2) + ' Mbit/s';
}

function row(label, value) {
	return E('tr', { 'class': 'tr' }, [
		E('td', { 'class': 'td left', 'width': '33%' }, label),
		E('td', { 'class': 'td left' }, value)
	]);
}

// A finished test's figures: the grade is judged on the induced latency (loaded median minus
// idle median) of the primary probe class.
function figures(s) {
	var primary = (s.probes || []).filter(function(p) { return p.name == s.primary_probe; })[0] || {};
	return E('table', { 'class': 'table' }, [
		row(_('Grade'), E('strong', {}, s.grade || '-')),
		row(_('Latency, idle'), ms(s.idle_latency_ms)),
		row(_('Latency added under load (median)'), ms(s.induced_latency_ms)),
		row(_('Latency added under load (90th percentile)'), ms(primary.induced_p90_ms)),
		row(_('Round trips per minute under load'), s.rpm == null ? '-' : Math.round(s.rpm)),
		row(_('Download goodput'), rate((s.download || {}).goodput_bps)),
		row(_('Upload goodput'), rate((s.upload || {}).goodput_bps))
	]);
}

function plots(names, box) {
	return Promise.all(names.map(function(name) {
		return callPlot(name).then(function(r) {
			if (r.error)
				return E('p', { 'class': 'alert-message warning' }, r.error);
			return E('img', {
				'src': 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(r.svg),
				'alt': name, 'style': 'max-width:100%; background:#fff; margin:.5em 0'
			});
		});
	})).then(function(imgs) {
		dom.content(box, imgs);
	});
}

function draw(st, box) {
	if (st.error && st.state == null)
		return E('p', { 'class': 'alert-message warning' }, st.error);
	if (st.state == 'none')
		return E('p', {}, _('No test has run since the router started.'));
	var head = E('p', {}, _('Test to %s, profile %s, %d s of load.').format(st.server, st.profile, st.duration));
	if (st.state == 'running') {
		var pct = st.total_s ? Math.min(100, Math.round(100 * st.elapsed_s / st.total_s)) : 0;
		return E([], [ head,
			E('div', { 'class': 'cbi-progressbar', 'title': pct + '%' }, E('div', { 'style': 'width:' + pct + '%' })),
			E('p', {}, st.total_s ? _('%d of %d s').format(st.elapsed_s, st.total_s) : _('Starting...')),
			st.progress ? E('pre', {}, st.progress) : E([])
		]);
	}
	if (st.state == 'lost')
		return E([], [ head, E('p', { 'class': 'alert-message warning' }, st.error) ]);
	if (st.state == 'cancelled')
		return E([], [ head, E('p', {}, _('The test was cancelled.')) ]);
	var parts = [ head ];
	if (st.exit != 0)
		parts.push(E('p', { 'class': 'alert-message warning' }, [
			_('The test failed (exit status %d):').format(st.exit), E('pre', {}, st.error || '')
		]));
	if (st.summary) {
		if (st.summary.partial)
			parts.push(E('p', { 'class': 'alert-message warning' }, _('The test ended early: what was measured is marked partial.')));
		parts.push(figures(st.summary));
	}
	if (st.results)
		parts.push(E('p', {}, _('Results file (kept until the next test or a reboot): %s').format(st.results)));
	if (st.plots && st.plots.length) {
		var pbox = E('div', {}, E('em', {}, _('Loading the plots...')));
		parts.push(pbox);
		plots(st.plots, pbox);
	} else if (st.summary) {
		parts.push(E('p', {}, _('This build draws no plots: `unbloat plot RESULTS` on another machine draws them from the results file.')));
	}
	return E([], parts);
}

return view.extend({
	load: function() {
		return callTestStatus();
	},

	render: function(st) {
		var self = this;
		var box = E('div', { 'id': 'unbloat-test' });
		var server = E('input', { 'class': 'cbi-input-text', 'type': 'text', 'placeholder': 'unbloat.example.net:4420' });
		var profile = E('select', { 'class': 'cbi-input-select' }, PROFILES.map(function(p) {
			return E('option', { 'value': p }, p);
		}));
		var duration = E('input', { 'class': 'cbi-input-text', 'type': 'number', 'min': 5, 'max': 300, 'value': 30 });
		var start = E('button', { 'class': 'cbi-button cbi-button-action' }, _('Start the test'));
		var cancel = E('button', { 'class': 'cbi-button cbi-button-negative', 'style': 'display:none' }, _('Cancel the test'));
		var running = function(yes) {
			start.disabled = yes;
			cancel.style.display = yes ? '' : 'none';
		};

		// While a test runs: its status every 2 s, then the results once, and no more polls.
		var watch = function() {
			return callTestStatus().then(function(s) {
				dom.content(box, draw(s, box));
				running(s.state == 'running');
				if (s.state != 'running')
					poll.remove(watch);
			});
		};

		start.addEventListener('click', ui.createHandlerFn(self, function() {
			return callStart(server.value.trim(), profile.value, +duration.value).then(function(r) {
				if (r.error) {
					ui.addNotification(null, E('p', {}, r.error), 'warning');
					return;
				}
				running(true);
				poll.add(watch, 2);
				return watch();
			});
		}));

		cancel.addEventListener('click', ui.createHandlerFn(self, function() {
			return callCancel().then(function(r) {
				if (r.error)
					ui.addNotification(null, E('p', {}, r.error), 'warning');
				return watch();
			});
		}));

		dom.content(box, draw(st, box));
		if (st.state == 'running') {
			running(true);
			poll.add(watch, 2);
		}
		return E([], [
			E('h2', {}, _('Smart Queue Management (unbloat): test')),
			E('div', { 'class': 'cbi-map-descr' },
				_('Measures the latency under load from this router to a far end running `unbloat serve` (or irtt or iperf3), and grades it. The load saturates the link for its length: other traffic will be slow meanwhile.')),
			E('div', { 'class': 'cbi-section' }, [
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title' }, _('Far end')),
					E('div', { 'class': 'cbi-value-field' }, [ server, E('div', { 'class': 'cbi-value-description' },
						_('HOST, HOST:PORT, or unbloat://, irtt:// or iperf3:// before one')) ]) ]),
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title' }, _('Profile')),
					E('div', { 'class': 'cbi-value-field' }, [ profile, E('div', { 'class': 'cbi-value-description' },
						_('rrul: four streams each way and latency probes in several classes')) ]) ]),
				E('div', { 'class': 'cbi-value' }, [ E('label', { 'class': 'cbi-value-title' }, _('Load (seconds)')),
					E('div', { 'class': 'cbi-value-field' }, duration) ]),
				E('div', { 'class': 'cbi-page-actions' }, [ start, ' ', cancel ])
			]),
			E('div', { 'class': 'cbi-section' }, [ E('h3', {}, _('Last test')), box ])
		]);
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
