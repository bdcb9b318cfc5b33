package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;

/** A registered memory region ({@code struct ibv_mr}): the memory, its lkey and rkey. */
public final class MemoryRegion extends NativeObject {
    private final MemorySegment memory;
    private final long addr;
    private final long length;
    private final int lkey;
    private final int rkey;

    MemoryRegion(MemorySegment mr, MemorySegment memory, ProtectionDomain pd) {
        super("MemoryRegion", mr.reinterpret(IbvMr.SIZE), pd);
        this.memory = memory;
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

    /** Fails unless {@code [offset, offset + length)} lies in this region. */
    void checkRange(long offset, int length) {
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
        try {
            LibIbverbs.check("ibv_dereg_mr", (int) LibIbverbs.IBV_DEREG_MR.invokeExact(Errno.state(), pointer));
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
    }
}
