package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

/** A registered memory region ({@code struct ibv_mr}): the memory, its lkey and rkey. */
public final class MemoryRegion extends NativeObject {
    private static final long PAGE = 4096;
    /** Bytes of the pages the process's live regions span, as the kernel counts them against RLIMIT_MEMLOCK. */
    private static final AtomicLong PINNED = new AtomicLong();
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
        PINNED.addAndGet(pinnedBytes(addr, length));
    }

    /**
     * Bytes the memory regions this process has registered (and not yet deregistered) pin: every page they span,
     * counted per region as the kernel's {@code ib_umem_get} counts them in {@code pinned_vm} ({@code VmPin})
     * against {@code RLIMIT_MEMLOCK}.
     */
    public static long pinnedBytes() {
        return PINNED.get();
    }

    /** The bytes of the 4 KiB pages {@code [addr, addr + length)} spans. */
    static long pinnedBytes(long addr, long length) {
        if (length == 0) {
            return 0;
        }
        long first = addr & -PAGE;
        long end = (addr + length + PAGE - 1) & -PAGE;
        return end - first;
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
        PINNED.addAndGet(-pinnedBytes(addr, length));
    }
}
