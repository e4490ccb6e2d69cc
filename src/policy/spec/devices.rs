//! The devices step: the requested host devices and the device cgroup rules (deny all, then
//! allow what was asked; a privileged container may use every device).

use std::path::PathBuf;

use oci_spec::runtime::{LinuxDevice, LinuxDeviceCgroup, LinuxDeviceType};

use super::input::Device;

pub fn with_devices(devices: &[Device], privileged: bool) -> (Vec<LinuxDevice>, Vec<LinuxDeviceCgroup>) {
    let mut rules = vec![device_rule(false, None, None, None, "rwm")];
    let mut linux_devices = Vec::new();
    for d in devices {
        let typ = if d.char { LinuxDeviceType::C } else { LinuxDeviceType::B };
        let mut dev = LinuxDevice::default();
        dev.set_path(PathBuf::from(&d.container_path));
        dev.set_typ(typ);
        dev.set_major(d.major);
        dev.set_minor(d.minor);
        dev.set_file_mode(Some(d.mode & 0o777));
        dev.set_uid(Some(0));
        dev.set_gid(Some(0));
        linux_devices.push(dev);
        rules.push(device_rule(true, Some(typ), Some(d.major), Some(d.minor), &d.permissions));
    }
    if privileged {
        rules = vec![device_rule(true, None, None, None, "rwm")];
    }
    (linux_devices, rules)
}

fn device_rule(
    allow: bool,
    typ: Option<LinuxDeviceType>,
    major: Option<i64>,
    minor: Option<i64>,
    access: &str,
) -> LinuxDeviceCgroup {
    let mut rule = LinuxDeviceCgroup::default();
    rule.set_allow(allow);
    rule.set_typ(typ);
    rule.set_major(major);
    rule.set_minor(minor);
    rule.set_access(Some(access.to_string()));
    rule
}
