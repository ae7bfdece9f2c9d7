//! Every read and change an operator makes of the root's files and account
//! names goes through these methods of [`Ctx`]. A real run reads and
//! changes the disk ([`RootFs`]); a dry run reads through its overlay
//! ([`Simulated`]) and records each change there after making the checks
//! the real change would make. So the operators have one code path for
//! both, and a dry run sees, and refuses, what the real run would
//! (issue 21 item 3).

use super::{current_gid, current_uid, Ctx};
use crate::rootfs::{FsError, Kind, Meta};

impl Ctx<'_> {
    /// The metadata of the object at `path` (the would-be one in a dry run).
    pub fn lstat(&self, path: &str) -> Result<Option<Meta>, FsError> {
        match self.sim {
            Some(sim) => sim.lstat(self.fs, path),
            None => self.fs.lstat(path),
        }
    }

    pub fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        match self.sim {
            Some(sim) => sim.read_file(self.fs, path),
            None => self.fs.read_file(path),
        }
    }

    pub fn read_link(&self, path: &str) -> Result<Option<String>, FsError> {
        match self.sim {
            Some(sim) => sim.read_link(self.fs, path),
            None => self.fs.read_link(path),
        }
    }

    /// [`crate::rootfs::RootFs::write_file`].
    pub fn write_file(
        &self,
        path: &str,
        bytes: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.write_file(path, bytes, mode, owner);
        };
        sim.check_change(self.fs, path)?;
        match sim.lstat(self.fs, path)?.map(|m| m.kind) {
            Some(Kind::Symlink) => return Err(FsError::Symlink(path.to_owned())),
            Some(Kind::Dir) => {
                return Err(FsError::Io {
                    path: path.to_owned(),
                    op: "replace a directory with a file at",
                    errno: rustix::io::Errno::ISDIR,
                })
            }
            _ => {}
        }
        let owner = owner.unwrap_or_else(|| (current_uid(), current_gid()));
        sim.wrote_file(path, bytes, mode, owner);
        Ok(())
    }

    /// [`crate::rootfs::RootFs::create_dir`].
    pub fn create_dir(&self, path: &str, mode: u32) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.create_dir(path, mode);
        };
        sim.check_change(self.fs, path)?;
        match sim.lstat(self.fs, path)? {
            Some(m) if m.kind == Kind::Symlink => Err(FsError::Symlink(path.to_owned())),
            Some(m) => {
                sim.changed_meta(path, m, mode, m.uid, m.gid);
                Ok(())
            }
            None => {
                sim.made_dir(path, mode, (current_uid(), current_gid()));
                Ok(())
            }
        }
    }

    /// [`crate::rootfs::RootFs::set_mode`].
    pub fn set_mode(&self, path: &str, mode: u32) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.set_mode(path, mode);
        };
        let now = self.existing(path, "set the mode of")?;
        sim.changed_meta(path, now, mode, now.uid, now.gid);
        Ok(())
    }

    /// [`crate::rootfs::RootFs::set_owner`]: like `chown`, it clears the
    /// setuid and setgid bits of a regular file.
    pub fn set_owner(&self, path: &str, uid: u32, gid: u32) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.set_owner(path, uid, gid);
        };
        let now = self.existing(path, "set the owner of")?;
        let mode = if now.kind == Kind::File {
            now.mode & !0o6000
        } else {
            now.mode
        };
        sim.changed_meta(path, now, mode, uid, gid);
        Ok(())
    }

    /// [`crate::rootfs::RootFs::symlink`].
    pub fn symlink(&self, path: &str, target: &str) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.symlink(path, target);
        };
        sim.check_change(self.fs, path)?;
        if sim.lstat(self.fs, path)?.map(|m| m.kind) == Some(Kind::Dir) {
            return Err(FsError::Io {
                path: path.to_owned(),
                op: "replace a directory with a link at",
                errno: rustix::io::Errno::ISDIR,
            });
        }
        sim.linked(path, target, (current_uid(), current_gid()));
        Ok(())
    }

    /// [`crate::rootfs::RootFs::remove`].
    pub fn remove(&self, path: &str) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.remove(path);
        };
        sim.check_change(self.fs, path)?;
        sim.removed(path);
        Ok(())
    }

    /// [`crate::rootfs::RootFs::remove_entry`]: `name` as read from the
    /// directory `dir` (not necessarily UTF-8).
    pub fn remove_entry(&self, dir: &str, name: &[u8]) -> Result<(), FsError> {
        let Some(sim) = self.sim else {
            return self.fs.remove_entry(dir, name);
        };
        let path = format!(
            "{}/{}",
            dir.trim_end_matches('/'),
            String::from_utf8_lossy(name)
        );
        // The directory is checked as the real removal checks it, and named
        // alike in the refusal.
        let dir = dir.trim_end_matches('/');
        sim.check_change(self.fs, &path).map_err(|e| match e {
            FsError::SharedDirectory { .. } => FsError::SharedDirectory {
                path: dir.to_owned(),
                dir: dir.to_owned(),
            },
            other => other,
        })?;
        sim.removed(&path);
        Ok(())
    }

    /// A dry run's checks before a change in place: the object exists,
    /// its directory may be changed, it has no other hard links.
    fn existing(&self, path: &str, op: &'static str) -> Result<Meta, FsError> {
        let Some(sim) = self.sim else {
            return Err(FsError::BadPath(path.to_owned()));
        };
        sim.check_in_place(self.fs, path)?;
        sim.lstat(self.fs, path)?.ok_or_else(|| FsError::Io {
            path: path.to_owned(),
            op,
            errno: rustix::io::Errno::NOENT,
        })
    }

    /// The id of user `name`: in a dry run, as the run would have left the
    /// account tables (a user an earlier promise creates has its would-be
    /// id).
    pub fn uid(&self, name: &str) -> Result<u32, String> {
        match self.sim.map(|s| s.user_id(name)) {
            Some(Some(Some(uid))) => Ok(uid),
            Some(Some(None)) => Err(format!(
                "no user `{name}` in the root's /etc/passwd (this run removes it)"
            )),
            _ => self.accounts.uid(name),
        }
    }

    /// The id of group `name` (see [`Ctx::uid`]).
    pub fn gid(&self, name: &str) -> Result<u32, String> {
        match self.sim.map(|s| s.group_id(name)) {
            Some(Some(Some(gid))) => Ok(gid),
            Some(Some(None)) => Err(format!(
                "no group `{name}` in the root's /etc/group (this run removes it)"
            )),
            _ => self.accounts.gid(name),
        }
    }
}
