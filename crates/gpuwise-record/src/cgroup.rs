//! The owner of a process from its `/proc/PID/cgroup`: container id and Kubernetes pod UID.
//!
//! Written by hand: the formats are a handful of path conventions, and no maintained crate reads
//! them without also talking to a container runtime. Handled (cgroup v1 and v2):
//! - Kubernetes, cgroupfs driver: `/kubepods/burstable/pod<uid>/<container id>`;
//! - Kubernetes, systemd driver:
//!   `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid with _>.slice/cri-containerd-<id>.scope`
//!   (also `crio-`, `docker-`);
//! - Docker / Podman: `/docker/<id>`, `/system.slice/docker-<id>.scope`, `libpod-<id>.scope`.

use crate::reading::Owner;

/// The owner named by the text of a `/proc/PID/cgroup` file. The v2 line (`0::…`) is preferred;
/// otherwise the first v1 line that names a pod or container.
#[must_use]
pub fn owner(text: &str) -> Owner {
    let paths: Vec<&str> = text
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .collect();
    let v2 = text
        .lines()
        .find(|l| l.starts_with("0::"))
        .and_then(|l| l.get(3..));
    let best = v2
        .filter(|p| names_something(p))
        .or_else(|| paths.iter().copied().find(|p| names_something(p)))
        .or(v2)
        .or_else(|| paths.first().copied());
    let Some(path) = best else {
        return Owner::default();
    };
    Owner {
        container_id: path.split('/').rev().find_map(container_id),
        pod_uid: path.split('/').find_map(pod_uid),
        cgroup: Some(path.to_owned()),
    }
}

fn names_something(path: &str) -> bool {
    path.split('/')
        .any(|s| container_id(s).is_some() || pod_uid(s).is_some())
}

/// A 64-hex-digit container id in one path segment, bare or as `<runtime>-<id>.scope`.
fn container_id(segment: &str) -> Option<String> {
    let s = segment.strip_suffix(".scope").unwrap_or(segment);
    let id = s.rsplit('-').next().unwrap_or(s);
    (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
}

/// A pod UID in one path segment: `pod<uid>` (cgroupfs) or `…-pod<uid with _>.slice` (systemd).
fn pod_uid(segment: &str) -> Option<String> {
    let s = segment.strip_suffix(".slice").unwrap_or(segment);
    let at = s.rfind("pod")?;
    if at > 0 && !s[..at].ends_with('-') {
        return None;
    }
    let uid = s[at + 3..].replace('_', "-");
    let shape = uid.len() == 36
        && uid.bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        });
    shape.then(|| uid.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CID: &str = "3f1d2c5e8a9b0c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d";
    const UID: &str = "6b8e3f0a-1c2d-4e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn kubernetes_systemd_v2() {
        let text = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope\n",
            UID.replace('-', "_")
        );
        let o = owner(&text);
        assert_eq!(o.pod_uid.as_deref(), Some(UID));
        assert_eq!(o.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn kubernetes_cgroupfs_v1() {
        let text = format!(
            "12:pids:/kubepods/besteffort/pod{UID}/{CID}\n11:memory:/kubepods/besteffort/pod{UID}/{CID}\n1:name=systemd:/kubepods/besteffort/pod{UID}/{CID}\n"
        );
        let o = owner(&text);
        assert_eq!(o.pod_uid.as_deref(), Some(UID));
        assert_eq!(o.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn docker_and_podman() {
        let o = owner(&format!("0::/system.slice/docker-{CID}.scope\n"));
        assert_eq!(o.container_id.as_deref(), Some(CID));
        assert_eq!(o.pod_uid, None);
        let o = owner(&format!("0::/machine.slice/libpod-{CID}.scope/container\n"));
        assert_eq!(o.container_id.as_deref(), Some(CID));
        let o = owner(&format!("4:devices:/docker/{CID}\n"));
        assert_eq!(o.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn a_plain_process_has_no_owner_but_its_cgroup() {
        let o = owner("0::/user.slice/user-1000.slice/session-3.scope\n");
        assert_eq!(o.container_id, None);
        assert_eq!(o.pod_uid, None);
        assert_eq!(
            o.cgroup.as_deref(),
            Some("/user.slice/user-1000.slice/session-3.scope")
        );
        assert_eq!(owner(""), Owner::default());
    }

    #[test]
    fn look_alikes_are_not_owners() {
        // A 63-digit id, a pod segment that is part of a word, a UID with a bad shape.
        let o = owner(&format!(
            "0::/system.slice/docker-{}.scope/ipod{UID}/pod1234\n",
            &CID[1..]
        ));
        assert_eq!(o.container_id, None);
        assert_eq!(o.pod_uid, None);
    }
}
