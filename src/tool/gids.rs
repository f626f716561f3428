//! `rsverbs gids`: every port's GID table, one row per entry, holes as
//! ranges, and the index rdma_cm and perftest would pick by default.

use crate::ffi::{self, Device, LINK_LAYER_ETHERNET};
use crate::table::{self, Slot, Table, gid_text, printable, type_name, v4_mapped};
use crate::net;
use rsverbs::select::{default_roce_type, rules};

/// One port, read: what `gids` prints and `doctor` checks.
pub struct Port {
    pub port: u8,
    pub info: ffi::PortInfo,
    pub table: Table,
    /// The RoCE type rdma_cm uses on this port.
    pub default_type: u32,
    pub rdma_cm: Vec<u32>,
    pub perftest: Option<u32>,
}

/// Reads `port` of `dev`; None when the port cannot be queried.
pub fn read_port(dev: &Device, port: u8) -> Option<Port> {
    let info = dev.port(port)?;
    let table = table::read(dev, port, info.gid_tbl_len.max(0) as u32);
    let roce = info.link_layer == LINK_LAYER_ETHERNET;
    let default_type = default_roce_type(&dev.name, port);
    let rdma_cm = if roce { rules::rdma_cm(&table.slots, default_type) } else { Vec::new() };
    let perftest = (roce && !table.slots.is_empty()).then(|| rules::perftest(&table.slots));
    Some(Port { port, info, table, default_type, rdma_cm, perftest })
}

/// The rows of one port (no header).
pub fn rows(dev: &str, p: &Port) -> Vec<String> {
    let mut out = Vec::new();
    let slots = &p.table.slots;
    let mut i = 0;
    while i < slots.len() {
        match &slots[i] {
            Slot::Gid(g) => {
                let nd = net::name(g.ifindex);
                let state = nd.as_deref().map_or("-".to_string(), net::operstate);
                let v4 = v4_mapped(&g.raw).map_or("-".to_string(), |a| a.to_string());
                let mut marks = Vec::new();
                if p.rdma_cm.contains(&g.index) {
                    marks.push("rdma_cm");
                }
                if p.perftest == Some(g.index) {
                    marks.push("perftest");
                }
                let marks = if marks.is_empty() { "-".to_string() } else { marks.join(",") };
                out.push(format!(
                    "{dev:<8} {:<4} {:<9} {} {v4:<15} {:<8} {:<10} {state:<8} {marks}",
                    p.port,
                    g.index,
                    gid_text(&g.raw),
                    type_name(g.gid_type).replace(' ', ""),
                    nd.as_deref().unwrap_or("-")
                ));
                i += 1;
            }
            Slot::Error(e) => {
                out.push(format!("{dev:<8} {:<4} {:<9} error {}", p.port, i, std::io::Error::from_raw_os_error(*e)));
                i += 1;
            }
            Slot::Empty => {
                let start = i;
                while i < slots.len() && matches!(slots[i], Slot::Empty) {
                    i += 1;
                }
                let range = if i - start == 1 { start.to_string() } else { format!("{start}..{}", i - 1) };
                out.push(format!("{dev:<8} {:<4} {range:<9} empty", p.port));
            }
        }
    }
    out
}

pub const HEADER: &str = "DEVICE   PORT INDEX     GID                                     IPv4            TYPE     NETDEV     STATE    DEFAULT";

/// The summary line of one port: counts, the engine's route, the picks.
pub fn summary(dev: &str, p: &Port) -> String {
    let n = p.table.slots.iter().filter(|s| matches!(s, Slot::Gid(_))).count();
    let route = p.table.route;
    let picks = match p.perftest {
        Some(pt) => format!(
            "; rdma_cm default type {}, perftest -x default {pt}",
            type_name(p.default_type)
        ),
        None => String::new(),
    };
    format!("# {dev} port {}: {n} of {} entries used, read by {route}{picks}", p.port, p.table.slots.len())
}

/// `rsverbs gids`: returns the exit status.
pub fn run(devs: &[Device], port: Option<u8>) -> i32 {
    println!("{HEADER}");
    let mut status = 0;
    for d in devs {
        let Some(limits) = d.limits() else {
            eprintln!("rsverbs: {}: ibv_query_device failed", d.name);
            status = 1;
            continue;
        };
        for p in 1..=limits.phys_port_cnt {
            if port.is_some_and(|want| want != p) {
                continue;
            }
            match read_port(d, p) {
                Some(pt) => {
                    for r in rows(&d.name, &pt) {
                        println!("{}", printable(&r));
                    }
                    println!("{}", printable(&summary(&d.name, &pt)));
                }
                None => {
                    eprintln!("rsverbs: {} port {p}: ibv_query_port failed", d.name);
                    status = 1;
                }
            }
        }
    }
    status
}
