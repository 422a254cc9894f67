//! LuCI's form for `/etc/config/unbloat` (the package `luci-app-unbloat`), written from the
//! option declarations: a field per option, named as UCI names it ([`super::Opt::uci_name`]),
//! with its one-line help and its example as the placeholder, on the tab of its place on the
//! daemon's own page (the card's or "more"). The file is `packaging/openwrt/luci/unbloat.js`;
//! the test below fails when it is not what the declarations write, and writes it again with
//! `UPDATE_GOLDEN=1 cargo test -p unbloat-shaper luci`. Above the form, "Import from SQM..."
//! previews what sqm's /etc/config/sqm becomes and applies it, through the rpcd plugin
//! (`packaging/openwrt/luci/rpcd/luci.unbloat`: `import_sqm`, `import_sqm_apply`).
//!
//! Heads up! LuCI's client-side forms (`luci-static/resources/form.js`: `form.Map`,
//! `TypedSection`, `Value`, `ListValue`, `DynamicList`, `taboption`), its views (`view.extend`)
//! and `menu.d`/`acl.d` JSON; sqm's own page (luci-app-sqm's `view/sqm.js`) is the model.
//!
//! An option left empty is not written, and then the qdisc's default holds, as in the TOML: so a
//! boolean is a choice of default, on or off rather than a checkbox, which cannot say "default".
//! What a value means is checked by unbloat itself, not here: a bad value is refused at the
//! reload (`logread -e unbloat` says why, and the shaping stays), and `unbloat config check
//! /etc/config/unbloat` says it first.

use super::value::Kind;
use super::{Web, OPTIONS};

/// The view's JavaScript.
pub fn view() -> String {
    let js = |s: &str| serde_json::to_string(s).expect("a string is JSON");
    let mut out = String::from(HEAD);
    for o in OPTIONS {
        let tab = if o.web == Web::Card { "basic" } else { "more" };
        let name = js(&o.uci_name());
        let class = class(o.field.kind());
        // A boolean as UCI writes it; LuCI's labels below.
        let choices = match o.field.kind() {
            Kind::Bool => vec!["1", "0"],
            _ => o.field.choices(),
        };
        out += &format!(
            "\n\t\to = s.taboption('{tab}', form.{class}, {name}, _({}));\n",
            js(o.key)
        );
        out += &format!("\t\to.description = _({});\n", js(o.short));
        if class == "ListValue" {
            out += "\t\to.value('', _('default'));\n";
            for c in choices {
                let label = match c {
                    "1" => "on",
                    "0" => "off",
                    c => c,
                };
                out += &format!("\t\to.value({}, {});\n", js(c), js(label));
            }
        } else {
            out += &format!("\t\to.placeholder = {};\n", js(o.example));
        }
        out += "\t\to.rmempty = true;\n";
    }
    out + TAIL
}

/// LuCI's form class for an option of this kind: a list of choices for a boolean too, whose
/// first choice is the default (see the module's note).
fn class(kind: Kind) -> &'static str {
    match kind {
        Kind::Bool | Kind::Choice => "ListValue",
        Kind::List => "DynamicList",
        Kind::Rate | Kind::Text | Kind::Int => "Value",
    }
}

/// The translation template (`po/templates/unbloat.pot`, as LuCI's `build/i18n-scan.pl` writes
/// one): every text in `_()` of the form this module writes, then of `others` (the app's other
/// views, hand-written: `(where LuCI's scan finds it, its text)`), once each, in order of first
/// use. Translators copy it to `po/LANG/unbloat.po`; LuCI's build turns those into the
/// `luci-i18n-unbloat-LANG` packages.
pub fn pot(others: &[(&str, &str)]) -> String {
    let form = view();
    let mut ids: Vec<(String, &str)> = Vec::new();
    for (file, text) in std::iter::once((VIEW, form.as_str())).chain(others.iter().copied()) {
        let mut rest = text;
        while let Some(at) = rest.find("_(") {
            rest = &rest[at + 2..];
            let Some(text) = js_literal(rest) else {
                continue;
            };
            if !ids.iter().any(|(id, _)| *id == text) {
                ids.push((text, file));
            }
        }
    }
    let po = |t: &str| {
        t.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let mut out = String::from("msgid \"\"\nmsgstr \"Content-Type: text/plain; charset=UTF-8\"\n");
    for (id, file) in ids {
        out += &format!("\n#: {file}\nmsgid \"{}\"\nmsgstr \"\"\n", po(&id));
    }
    out
}

/// Where LuCI's scan finds the form, for the template's references.
const VIEW: &str = "htdocs/luci-static/resources/view/unbloat.js";
/// Where it finds the status view (`packaging/openwrt/luci/unbloat/status.js`).
pub const STATUS_VIEW: &str = "htdocs/luci-static/resources/view/unbloat/status.js";
/// Where it finds the test view (`packaging/openwrt/luci/unbloat/test.js`).
pub const TEST_VIEW: &str = "htdocs/luci-static/resources/view/unbloat/test.js";
/// Where it finds the tune view (`packaging/openwrt/luci/unbloat/tune.js`).
pub const TUNE_VIEW: &str = "htdocs/luci-static/resources/view/unbloat/tune.js";

/// The JavaScript string literal `s` starts with (the view's: JSON's double quotes, or single
/// quotes without escapes in its fixed text).
fn js_literal(s: &str) -> Option<String> {
    match s.chars().next()? {
        '"' => serde_json::Deserializer::from_str(s)
            .into_iter::<String>()
            .next()?
            .ok(),
        '\'' => s[1..].split_once('\'').map(|(t, _)| t.to_string()),
        _ => None,
    }
}

const HEAD: &str = "'use strict';
'require view';
'require form';
'require rpc';
'require ui';

// luci-app-unbloat: the form for /etc/config/unbloat. Written from unbloat's option declarations
// (crates/shaper/src/options/luci.rs); do not edit it by hand.

var callImport = rpc.declare({
\tobject: 'luci.unbloat',
\tmethod: 'import_sqm',
\texpect: { '': {} }
});

var callImportApply = rpc.declare({
\tobject: 'luci.unbloat',
\tmethod: 'import_sqm_apply',
\tparams: [ 'digest' ],
\texpect: { '': {} }
});

// Import from SQM: what `unbloat config import-sqm /etc/config/sqm --uci` would write, beside the
// file it replaces and the notes on what did not carry over as it was. Nothing is written before
// Apply, which writes it only if neither file changed since this preview (the plugin compares a
// digest of both) and reloads the service.
function importSqm() {
\treturn callImport().then(function(r) {
\t\tif (r.error)
\t\t\treturn ui.addNotification(null, E('p', {}, r.error), 'warning');
\t\tvar notes = (r.import.notes || []).filter(function(n) { return n.kind != 'mapped'; });
\t\tui.showModal(_('Import from SQM'), [
\t\t\tE('p', {}, _('Apply replaces /etc/config/unbloat with this, and reloads the service:')),
\t\t\tE('pre', {}, r.import.toml),
\t\t\tE('ul', {}, notes.map(function(n) {
\t\t\t\treturn E('li', {}, [ n.kind, n.queue, n.option ].filter(Boolean).join(', ') + ': ' + n.text);
\t\t\t})),
\t\t\tr.sqm_enabled ? E('p', { 'class': 'alert-message warning' },
\t\t\t\t_('sqm is enabled: unbloat refuses a device that sqm shapes. Stop and disable sqm (System, Startup).')) : E([]),
\t\t\tE('p', {}, r.current == null ? _('There is no /etc/config/unbloat yet.') : _('It replaces:')),
\t\t\tr.current == null ? E([]) : E('pre', {}, r.current),
\t\t\tE('div', { 'class': 'right' }, [
\t\t\t\tE('button', { 'class': 'btn', 'click': ui.hideModal }, _('Cancel')), ' ',
\t\t\t\tE('button', { 'class': 'btn cbi-button-action', 'click': ui.createHandlerFn(null, function() {
\t\t\t\t\treturn callImportApply(r.digest).then(function(a) {
\t\t\t\t\t\tui.hideModal();
\t\t\t\t\t\tif (a.error)
\t\t\t\t\t\t\treturn ui.addNotification(null, E('p', {}, a.error), 'warning');
\t\t\t\t\t\tlocation.reload();
\t\t\t\t\t});
\t\t\t\t}) }, _('Apply'))
\t\t\t])
\t\t]);
\t});
}

return view.extend({
\trender: function() {
\t\tvar m, s, o;

\t\tm = new form.Map('unbloat', _('Smart Queue Management (unbloat)'),
\t\t\t_('A section per device to shape. Rates need their unit (78mbit, 19950kbit). An empty field keeps the default. Save & Apply reloads the service: a value it refuses leaves the shaping as it was, and the system log says why.'));

\t\ts = m.section(form.TypedSection, 'interface', _('Interfaces'));
\t\ts.addremove = true;
\t\ts.anonymous = false;
\t\ts.tab('basic', _('Basic settings'));
\t\ts.tab('more', _('More options'));

\t\to = s.taboption('basic', form.Flag, 'enabled', _('Enabled'));
\t\to.default = '0';
\t\to.rmempty = false;

\t\to = s.taboption('basic', form.Value, 'interface', _('Interface'));
\t\to.description = _('The device to shape: the WAN device, as `ip link` names it (pppoe-wan, eth1).');
\t\to.rmempty = false;
";

const TAIL: &str = "
\t\t// Above the form: sqm's settings, imported through the rpcd plugin (importSqm above).
\t\treturn m.render().then(function(map) {
\t\t\treturn E([], [ E('div', { 'class': 'cbi-section' }, [
\t\t\t\tE('p', {}, _('Coming from sqm-scripts? Preview what its settings (/etc/config/sqm) become here: nothing is written until you apply them.')),
\t\t\t\tE('button', { 'class': 'cbi-button cbi-button-action', 'click': ui.createHandlerFn(null, importSqm) }, _('Import from SQM...'))
\t\t\t]), map ]);
\t\t});
\t}
});
";

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/openwrt/luci/unbloat.js"
    );

    #[test]
    fn the_luci_view_is_what_the_declarations_write() {
        let want = view();
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(FILE, &want).unwrap();
        }
        let have = std::fs::read_to_string(FILE).unwrap_or_default();
        assert!(have == want, "{FILE} is not what the option declarations write: run UPDATE_GOLDEN=1 cargo test -p unbloat-shaper luci, and review its diff");
    }

    #[test]
    fn the_translation_template_is_what_the_view_says() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../packaging/openwrt/luci/po/templates/unbloat.pot"
        );
        let status = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../packaging/openwrt/luci/unbloat/status.js"
        ))
        .unwrap();
        let test = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../packaging/openwrt/luci/unbloat/test.js"
        ))
        .unwrap();
        let tune = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../packaging/openwrt/luci/unbloat/tune.js"
        ))
        .unwrap();
        let want = pot(&[
            (STATUS_VIEW, &status),
            (TEST_VIEW, &test),
            (TUNE_VIEW, &tune),
        ]);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(std::path::Path::new(file).parent().unwrap()).unwrap();
            std::fs::write(file, &want).unwrap();
        }
        let have = std::fs::read_to_string(file).unwrap_or_default();
        assert!(have == want, "{file} is not the view's texts: run UPDATE_GOLDEN=1 cargo test -p unbloat-shaper luci, and review its diff");
        // Each option's label and help, once; the fixed texts too.
        for o in OPTIONS {
            let id = format!("msgid {}", serde_json::to_string(o.short).unwrap());
            assert_eq!(want.matches(&id).count(), 1, "{id}");
        }
        assert!(want.contains("msgid \"Basic settings\"") && want.contains("msgid \"default\""));
        assert_eq!(want.matches("msgid \"default\"").count(), 1);
        // The status view's texts follow the form's, under its own reference.
        assert!(want.contains(&format!("#: {STATUS_VIEW}\nmsgid \"Delay (peak)\"")));
        // The test view's, and the form's import from sqm.
        assert!(want.contains(&format!("#: {TEST_VIEW}\nmsgid \"Start the test\"")));
        assert!(want.contains(&format!("#: {TUNE_VIEW}\nmsgid \"Start the tune\"")));
        assert!(want.contains("msgid \"Finds the link's framing and the shaper rates"));
        assert!(want.contains(&format!("#: {VIEW}\nmsgid \"Import from SQM...\"")));
    }

    #[test]
    fn every_option_has_a_field_named_as_uci_names_it() {
        let v = view();
        for o in OPTIONS {
            let field = format!(
                "form.{}, \"{}\", _(\"{}\"));",
                class(o.field.kind()),
                o.uci_name(),
                o.key
            );
            assert!(v.contains(&field), "{}: no {field}", o.key);
        }
        assert!(
            v.contains("\"eqdisc_opts\"") && v.contains("\"ack_filter\""),
            "sqm's and unbloat's names"
        );
    }
}
