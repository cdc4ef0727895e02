//! Root + netns: build the lab's topology, check a frame from the generator namespace
//! reaches the sink only when Linux forwards it, that the sink's XDP program can be timed
//! (`--prog-time`), and that nothing is left afterwards.
//! Skips (passing, with a message) without root or `ip`.

use flowpath_lab::systems::{self, Ctx};
use flowpath_lab::topo::{self, Topology, SINK_IF, SINK_IP};
use flowpath_lab::{bpfmap, sh, Case};
use std::time::Duration;

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if sh::which("ip").is_none() {
        return Some("no `ip` (iproute2)".into());
    }
    if sh::ip(&["netns", "list"]).is_err() {
        return Some("`ip netns` does not work here".into());
    }
    if sh::which("bash").is_none() {
        return Some("no bash (used to send a datagram)".into());
    }
    None
}

fn lab_namespaces(id: &str) -> Vec<String> {
    sh::ip(&["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{id}-")))
        .map(str::to_string)
        .collect()
}

/// Send `n` UDP datagrams from the generator namespace to the sink's address.
fn send(t: &Topology, n: usize) {
    let script = format!("for i in $(seq {n}); do echo lab > /dev/udp/{SINK_IP}/9; done");
    sh::run(Some(&t.gen), "bash", &["-c", &script]).expect("send from gen");
}

fn sink_rx(t: &Topology) -> u64 {
    t.counters(&t.sink, SINK_IF).expect("sink counters").0
}

#[test]
fn frames_reach_the_sink_through_linux_forwarding_and_cleanup_leaves_nothing() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED topology test: {why}");
        return;
    }
    let id = topo::run_id();
    let dir = std::env::temp_dir().join(format!("{id}-xdp"));
    std::fs::create_dir_all(&dir).unwrap();
    topo::register_dir(&dir);
    let obj = (!flowpath_lab::XDP_SINK_OBJ.is_empty()).then(|| {
        let p = dir.join("xdp_sink.o");
        std::fs::write(&p, flowpath_lab::XDP_SINK_OBJ).unwrap();
        p
    });
    {
        let t = Topology::create(&id, obj.as_deref()).expect("build the topology");
        assert_eq!(lab_namespaces(&id).len(), 3);

        // Forwarding off: nothing gets through the switch namespace.
        let before = sink_rx(&t);
        send(&t, 5);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            sink_rx(&t),
            before,
            "frames crossed a switch that does not forward"
        );

        // Linux forwarding on: all of them arrive.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let exe = std::env::current_exe().unwrap();
        let ctx = Ctx {
            topo: &t,
            switch_cpu: usize::from(cpus > 1),
            gen_cpu: 0,
            exe: &exe,
            ovs_xdp_mode: "native",
            class: flowpath_lab::Class::Ipv4,
        };
        let mut linux = systems::make("linux").unwrap();
        linux
            .start(&ctx, Case::Hit)
            .expect("start linux forwarding");
        let before = sink_rx(&t);
        send(&t, 5);
        let got = sh::wait_for(Duration::from_secs(5), || {
            (sink_rx(&t) >= before + 5).then_some(())
        });
        let after = sink_rx(&t);
        assert!(got.is_some(), "sink counted {} of 5 frames", after - before);

        // The sink's XDP program timed as `--prog-time` times the switch's: its runs and
        // their nanoseconds grow with the frames while the statistics are on.
        if obj.is_some() {
            // Its VXLAN counter reads, and none of these datagrams is VXLAN.
            assert_eq!(bpfmap::xdp_counter(&t.sink, SINK_IF), Ok(0));
            let stats = bpfmap::enable_run_time_stats().expect("BPF_ENABLE_STATS");
            let a = bpfmap::prog_runs(&t.sink, SINK_IF).expect("the sink's program");
            assert_eq!(a.name, "xdp_sink");
            send(&t, 5);
            sh::wait_for(Duration::from_secs(5), || {
                (sink_rx(&t) >= after + 5).then_some(())
            })
            .expect("5 more frames at the sink");
            let b = bpfmap::prog_runs(&t.sink, SINK_IF).expect("the sink's program");
            assert!(b.run_cnt >= a.run_cnt + 5, "{a:?} -> {b:?}");
            let ns = b.ns_per_run_since(&a);
            assert!(ns.is_some_and(|ns| ns > 0.0), "{a:?} -> {b:?}");
            drop(stats);
        }
        linux.stop(&ctx);
    }
    // Dropping the topology tore it down.
    assert!(lab_namespaces(&id).is_empty(), "{:?}", lab_namespaces(&id));
    assert!(!dir.exists());

    // A dead run's namespace is found and removed by the cleanup.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    let ns = format!("{}{pid}-gen", topo::PREFIX);
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        sh::ip(&["netns", "add", &ns]).unwrap();
        let report = topo::cleanup_leftovers();
        assert!(
            report.iter().any(|l| l.contains(&ns)),
            "cleanup did not mention {ns}: {report:?}"
        );
        assert!(lab_namespaces(&format!("{}{pid}", topo::PREFIX)).is_empty());
    }
}
