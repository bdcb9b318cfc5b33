package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;

/** A registered memory region ({@code struct ibv_mr}): the memory, its lkey and rkey. */
public final class MemoryRegion extends NativeObject {
    private final MemorySegment memory;
    private final long addr;
    private final long length;
    private final int lkey;
    private final int rkey;
    private final int access;
    private final ProtectionDomain pd;

    MemoryRegion(MemorySegment mr, MemorySegment memory, int access, ProtectionDomain pd) {
        super("MemoryRegion", mr.reinterpret(IbvMr.SIZE), pd);
        this.memory = memory;
        this.access = access;
        this.pd = pd;
        this.addr = (long) IbvMr.ADDR.get(pointer, 0L);
        this.length = (long) IbvMr.LENGTH.get(pointer, 0L);
        this.lkey = (int) IbvMr.LKEY.get(pointer, 0L);
        this.rkey = (int) IbvMr.RKEY.get(pointer, 0L);
    }

    /** The registered memory. */
    public MemorySegment memory() {
        return memory;
    }

    /** The start address of the region ({@code ibv_mr.addr}). */
    public long addr() {
        return addr;
    }

    public long length() {
        return length;
    }

    public int lkey() {
        return lkey;
    }

    public int rkey() {
        return rkey;
    }

    /** The {@link IbvAccessFlags} the region was registered with. */
    public int access() {
        return access;
    }

    public ProtectionDomain pd() {
        return pd;
    }

    /** Fails unless {@code [offset, offset + length)} lies in this region. */
    void checkRange(long offset, long length) {
        checkOpen();
        if (length < 0) {
            throw new IllegalArgumentException("length: " + length + " (expected: >= 0)");
        }
        if (offset < 0 || offset > this.length - length) {
            throw new IndexOutOfBoundsException("[" + offset + ", " + offset + " + " + length
                    + ") is outside the memory region of " + this.length + " bytes");
        }
    }

    @Override
    void destroy() {
        int rc;
        try {
            rc = (int) LibIbverbs.IBV_DEREG_MR.invokeExact(Errno.state(), pointer);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (rc != 0) {
            int errno = rc > 0 ? rc : Errno.last();
            throw new VerbsException("ibv_dereg_mr", errno,
                    errno == Errno.EINVAL && (access & IbvAccessFlags.MW_BIND) != 0
                            ? "memory windows may still be bound to the region: invalidate or close them first"
                            : null);
        }
    }
}
