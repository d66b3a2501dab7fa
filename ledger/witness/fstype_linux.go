package witness

import "golang.org/x/sys/unix"

// sharedFS names the file system dir is on when several machines can mount it at once (NFS, SMB,
// Ceph, 9p, a FUSE one, a cluster file system), and "" for a local one. A witness's state must be
// local: its one-process lock and its fsync before each answer hold on one machine's disk, not
// across a network file system's clients.
func sharedFS(dir string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", err
	}
	return sharedFSName(int64(st.Type)), nil
}

func sharedFSName(magic int64) string {
	switch uint32(magic) {
	case unix.NFS_SUPER_MAGIC:
		return "NFS"
	case unix.SMB_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC:
		return "SMB/CIFS"
	case unix.CEPH_SUPER_MAGIC:
		return "Ceph"
	case unix.V9FS_MAGIC:
		return "9p"
	case unix.AFS_SUPER_MAGIC, unix.AFS_FS_MAGIC:
		return "AFS"
	case unix.CODA_SUPER_MAGIC:
		return "Coda"
	case unix.FUSE_SUPER_MAGIC:
		return "FUSE (sshfs, GlusterFS, s3fs, …)"
	case 0x0bd00bd0:
		return "Lustre"
	case 0x01161970:
		return "GFS2"
	case 0x7461636f:
		return "OCFS2"
	}
	return ""
}
