//! [`open`]: one far end, its load and its probes sharing a runtime, a dialer and the load's
//! connections (the self probes ride them), after one small GET proved the server answers.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use unbloat_report::Direction;

use super::conn::{self, read_bounded, Dialer, ReqBody};
use super::target::{resolve, runtime, HttpOptions, HttpTarget};
use super::url::{Scheme, Url};
use super::{load, probes, tls};
use crate::farend::{Load, Probes};
use crate::profile::StreamPlan;
use crate::MeasureError;

/// The two halves of a far end, as [`open`] returns them.
pub type FarEnd = (Box<dyn Load>, Box<dyn Probes>);

/// Opens the far end: see the module doc. `streams` gives the directions (and DSCP) of the
/// profile's load; their number does not matter, the ramp decides how many connections run.
pub fn open(
    target: &HttpTarget,
    streams: &[StreamPlan],
    opts: &HttpOptions,
    epoch: Instant,
) -> Result<FarEnd, MeasureError> {
    opts.check()?;
    let addr = resolve(&target.small)?;
    let tls = match target.small.scheme() {
        Scheme::Https => Some(tls::client_config(opts.ca_file.as_deref())?),
        Scheme::Http => None,
    };
    let dialer = Arc::new(Dialer::new(
        &target.small,
        addr,
        tls,
        opts.connect_timeout,
        opts.request_timeout,
    )?);
    let rt = Arc::new(runtime()?);
    let h2 = rt.block_on(preflight(&dialer, &target.small, opts.small_limit))?;
    let mut plan: Vec<(Direction, u8)> = Vec::new();
    for s in streams {
        if !plan.iter().any(|(d, _)| *d == s.direction) {
            plan.push((s.direction, s.dscp));
        }
    }
    let loaded: load::Loaded = Arc::new(Mutex::new(Vec::new()));
    let probes = probes::HttpProbes::start(
        Arc::clone(&rt),
        Arc::clone(&dialer),
        target.small.clone(),
        h2,
        Arc::clone(&loaded),
        opts,
        epoch,
    );
    let load = load::HttpLoad::new(rt, dialer, target, plan, opts, loaded);
    Ok((Box::new(load), Box::new(probes)))
}

/// One connection and a GET of the small object: the server answers as it should, or the
/// run does not start. Returns whether it speaks HTTP/2.
async fn preflight(dialer: &Dialer, small: &Url, limit: usize) -> Result<bool, MeasureError> {
    let mut conn = dialer.connect(0).await?;
    let get = conn.sender.send(http::Method::GET, small, ReqBody::Empty);
    let resp = match tokio::time::timeout(dialer.request_timeout, get).await {
        Err(_) => return Err(dialer.stalled("the answer to GET of the small object")),
        Ok(Err(e)) => {
            let why = format!("GET {}: {}", small.path(), conn::describe(&e));
            return Err(MeasureError::far_end(&dialer.server, why));
        }
        Ok(Ok(r)) => r,
    };
    dialer.check("GET", small, &resp)?;
    match tokio::time::timeout(
        dialer.request_timeout,
        read_bounded(resp.into_body(), limit),
    )
    .await
    {
        Err(_) => Err(dialer.stalled("the small object's body")),
        Ok(Err(why)) => Err(MeasureError::far_end(
            &dialer.server,
            format!("small object {}: {why}", small.path()),
        )),
        Ok(Ok(_)) => Ok(conn.sender.is_h2()),
    }
}
