//! Which uid, gid and supplementary groups a container runs as, from the request, the
//! image's `User`, and the image's /etc/passwd and /etc/group (passed in as text).

use crate::cri;

use super::PolicyError;
use crate::model::user::ResolvedUser;

/// The image's user database; empty text when the image has no such file.
#[derive(Debug, Clone, Default)]
pub struct UserDb {
    pub passwd: String,
    pub group: String,
}

impl UserDb {
    fn user(&self, name: &str) -> Option<(u32, u32)> {
        self.passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 4 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?))).flatten()
        })
    }

    fn user_by_uid(&self, uid: u32) -> Option<(String, u32)> {
        self.passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 4 && f[2].parse() == Ok(uid)).then(|| Some((f[0].to_string(), f[3].parse().ok()?))).flatten()
        })
    }

    fn group(&self, name: &str) -> Option<u32> {
        self.group.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 3 && f[0] == name).then(|| f[2].parse().ok()).flatten()
        })
    }

    /// Groups that list `user` as a member.
    fn member_of(&self, user: &str) -> Vec<u32> {
        self.group
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() >= 4 && f[3].split(',').any(|m| m == user)).then(|| f[2].parse().ok()).flatten()
            })
            .collect()
    }
}

/// Resolves the container's user: `run_as_user`/`run_as_username` override the image's
/// `User`; `run_as_group` overrides the group (and needs one of those two, as the CRI says);
/// supplementary groups are the request's plus, under the Merge policy (the default), the
/// user's memberships in the image's /etc/group; under Strict, the request's alone.
pub fn resolve(
    security: Option<&cri::LinuxContainerSecurityContext>,
    image_user: &str,
    db: &UserDb,
) -> Result<ResolvedUser, PolicyError> {
    let (image_name, image_group) = match image_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (image_user, None),
    };
    let requested_uid = security.and_then(|s| s.run_as_user.as_ref()).map(|v| v.value);
    let requested_name = security.map(|s| s.run_as_username.as_str()).filter(|s| !s.is_empty());
    if security.is_some_and(|s| s.run_as_group.is_some()) && requested_uid.is_none() && requested_name.is_none() {
        return Err(PolicyError::Invalid("run_as_group needs run_as_user or run_as_username".into()));
    }
    let strict = security.is_some_and(|s| s.supplemental_groups_policy == cri::SupplementalGroupsPolicy::Strict as i32);
    let (uid, mut gid, name) = if let Some(uid) = requested_uid {
        let uid = u32::try_from(uid).map_err(|_| PolicyError::Invalid(format!("run_as_user {uid} is out of range")))?;
        let (name, gid) = db.user_by_uid(uid).map(|(n, g)| (Some(n), g)).unwrap_or((None, 0));
        (uid, gid, name)
    } else {
        let user = requested_name.unwrap_or(image_name);
        if user.is_empty() {
            (0, 0, Some("root".to_string()))
        } else if let Ok(uid) = user.parse::<u32>() {
            let (name, gid) = db.user_by_uid(uid).map(|(n, g)| (Some(n), g)).unwrap_or((None, 0));
            (uid, gid, name)
        } else {
            let (uid, gid) = db
                .user(user)
                .ok_or_else(|| PolicyError::Invalid(format!("user {user:?} is not in the image's /etc/passwd")))?;
            (uid, gid, Some(user.to_string()))
        }
    };
    // The image's group applies only when the user was not overridden by the request.
    if requested_uid.is_none() && requested_name.is_none() {
        if let Some(group) = image_group.filter(|g| !g.is_empty()) {
            gid = match group.parse::<u32>() {
                Ok(g) => g,
                Err(_) => db
                    .group(group)
                    .ok_or_else(|| PolicyError::Invalid(format!("group {group:?} is not in the image's /etc/group")))?,
            };
        }
    }
    if let Some(g) = security.and_then(|s| s.run_as_group.as_ref()) {
        gid = u32::try_from(g.value)
            .map_err(|_| PolicyError::Invalid(format!("run_as_group {} is out of range", g.value)))?;
    }
    let mut additional_gids = match name.as_deref() {
        Some(n) if !strict => db.member_of(n),
        _ => Vec::new(),
    };
    for g in security.map(|s| s.supplemental_groups.as_slice()).unwrap_or(&[]) {
        additional_gids.push(
            u32::try_from(*g).map_err(|_| PolicyError::Invalid(format!("supplemental group {g} is out of range")))?,
        );
    }
    additional_gids.retain(|g| *g != gid);
    additional_gids.sort_unstable();
    additional_gids.dedup();
    additional_gids.insert(0, gid);
    Ok(ResolvedUser { uid, gid, additional_gids })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> UserDb {
        UserDb {
            passwd: "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n".into(),
            group: "root:x:0:\napp:x:1001:\nwheel:x:10:app,root\naudio:x:29:app\nnogroup:x:65534:\n".into(),
        }
    }

    fn ctx(uid: Option<i64>, name: &str, gid: Option<i64>, extra: &[i64]) -> cri::LinuxContainerSecurityContext {
        cri::LinuxContainerSecurityContext {
            run_as_user: uid.map(|value| cri::Int64Value { value }),
            run_as_username: name.into(),
            run_as_group: gid.map(|value| cri::Int64Value { value }),
            supplemental_groups: extra.to_vec(),
            ..Default::default()
        }
    }

    fn strict(mut c: cri::LinuxContainerSecurityContext) -> cri::LinuxContainerSecurityContext {
        c.supplemental_groups_policy = cri::SupplementalGroupsPolicy::Strict as i32;
        c
    }

    #[test]
    fn resolution_table() {
        let u = |uid, gid, extra: &[u32]| {
            let additional_gids = [&[gid][..], extra].concat();
            Ok::<_, ()>(ResolvedUser { uid, gid, additional_gids })
        };
        let cases: Vec<(Option<cri::LinuxContainerSecurityContext>, &str, Result<ResolvedUser, ()>)> = vec![
            (None, "", u(0, 0, &[10])),
            (None, "app", u(1000, 1001, &[10, 29])),
            (None, "1000", u(1000, 1001, &[10, 29])),
            (None, "app:wheel", u(1000, 10, &[29])),
            (None, "4242:4343", u(4242, 4343, &[])),
            (None, "ghost", Err(())),
            (None, "app:ghosts", Err(())),
            (Some(ctx(Some(65534), "", None, &[])), "app", u(65534, 65534, &[])),
            (Some(ctx(None, "app", Some(5), &[7])), "", u(1000, 5, &[7, 10, 29])),
            (Some(ctx(Some(1000), "", None, &[1001])), "", u(1000, 1001, &[10, 29])),
            (Some(ctx(Some(-1), "", None, &[])), "", Err(())),
            // run_as_group alone is refused.
            (Some(ctx(None, "", Some(5), &[])), "app", Err(())),
            // Strict: the request's groups only, none from the image's /etc/group.
            (Some(strict(ctx(Some(1000), "", None, &[1234]))), "", u(1000, 1001, &[1234])),
            (Some(strict(ctx(None, "app", None, &[]))), "", u(1000, 1001, &[])),
        ];
        for (security, image_user, expected) in cases {
            let got = resolve(security.as_ref(), image_user, &db()).map_err(|_| ());
            assert_eq!(got, expected, "{security:?} {image_user:?}");
        }
    }
}
