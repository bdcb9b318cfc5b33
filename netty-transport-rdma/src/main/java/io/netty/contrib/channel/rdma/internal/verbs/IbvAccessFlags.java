package io.netty.contrib.channel.rdma.internal.verbs;

/** {@code enum ibv_access_flags}: memory region and queue pair access rights. */
public final class IbvAccessFlags {
    public static final int LOCAL_WRITE = 1;
    public static final int REMOTE_WRITE = 1 << 1;
    public static final int REMOTE_READ = 1 << 2;
    public static final int REMOTE_ATOMIC = 1 << 3;
    /** Memory windows may be bound to the region (the region itself need grant no remote access). */
    public static final int MW_BIND = 1 << 4;
    /** A type 2 window addressed from 0 at its start instead of by virtual address. */
    public static final int ZERO_BASED = 1 << 5;
    /** First of the optional flags a device may ignore (they need {@code ibv_reg_mr_iova2}). */
    public static final int RELAXED_ORDERING = 1 << 20;
    static final int OPTIONAL_RANGE = 0x3ff00000;

    private IbvAccessFlags() {
    }
}
