package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.MemorySegment;

/**
 * A memory window ({@code struct ibv_mw}), allocated by {@link ProtectionDomain#allocMw}: remote access to a range
 * of a {@link MemoryRegion} registered with {@link IbvAccessFlags#MW_BIND}, under the window's own rkey.
 *
 * <p>A type 2 window is bound by an {@link IbvWrOpcode#BIND_MW} work request ({@link SendWorkRequests#bindMw})
 * posted on a QP of the window's PD, and is then valid on that QP only, until {@link IbvWrOpcode#LOCAL_INV}, the
 * peer's {@link IbvWrOpcode#SEND_WITH_INV} or {@link #close()} invalidates it. Each bind gives the window a new
 * rkey ({@link #nextRkey()}: the same index, the next 8-bit key) that neither the device nor rdma-core stores:
 * after {@link QueuePair#postSend} accepted the bind, record it with {@link #updateRkey}, as the next bind and
 * every later look at {@link #rkey()} expect (the device names the window by {@code ibv_mw.rkey} as it is when
 * a bind is posted).
 *
 * <p>{@link #close()} is {@code ibv_dealloc_mw}, which also invalidates a bound window; the PD cannot be closed
 * while windows of it are open. The rkey belongs to the thread that posts the window's binds.
 */
public final class MemoryWindow extends NativeObject {
    private static final int KEY_MASK = 0xFF;

    private final ProtectionDomain pd;
    private final MemorySegment deallocFn;
    private final int type;
    private int rkey;

    MemoryWindow(MemorySegment mw, ProtectionDomain pd, MemorySegment deallocFn) {
        super("MemoryWindow", mw.reinterpret(IbvMw.SIZE), pd);
        this.pd = pd;
        this.deallocFn = deallocFn;
        this.type = (int) IbvMw.TYPE.get(pointer, 0L);
        this.rkey = (int) IbvMw.RKEY.get(pointer, 0L);
    }

    /** The PD the window belongs to. */
    public ProtectionDomain pd() {
        return pd;
    }

    /** {@link IbvMwType}. */
    public int type() {
        return type;
    }

    /**
     * The window's current rkey ({@code ibv_mw.rkey}): the one the last recorded bind gave it, or the one it was
     * allocated with.
     */
    public int rkey() {
        return rkey;
    }

    /** The rkey for the next bind: {@link #rkey()} with its 8-bit key incremented. */
    public int nextRkey() {
        return incRkey(rkey);
    }

    /**
     * Records {@code newRkey}, the rkey of a type 2 bind just posted (accepted by {@link QueuePair#postSend}), in
     * {@code ibv_mw.rkey}. Call it after the post, not before: the device reads the old rkey from the window when
     * the bind is posted.
     *
     * @throws IllegalArgumentException if {@code newRkey} names another window (differs above the low 8 bits)
     */
    public void updateRkey(int newRkey) {
        checkOpen();
        checkSameWindow(newRkey);
        IbvMw.RKEY.set(pointer, 0L, newRkey);
        rkey = newRkey;
    }

    /**
     * {@code ibv_inc_rkey}: {@code rkey} with its low 8 bits (the consumer's key) incremented, wrapping from 0xff
     * to 0; the upper 24 bits (the index) unchanged.
     */
    public static int incRkey(int rkey) {
        return (rkey & ~KEY_MASK) | ((rkey + 1) & KEY_MASK);
    }

    /** Fails unless {@code newRkey} has this window's index (only the 8-bit key may change). */
    void checkSameWindow(int newRkey) {
        if (((newRkey ^ rkey) & ~KEY_MASK) != 0) {
            throw new IllegalArgumentException("rkey 0x" + Integer.toHexString(newRkey) + " is not a key of window 0x"
                    + Integer.toHexString(rkey) + ": only the low 8 bits may change (use nextRkey())");
        }
    }

    @Override
    void destroy() {
        int rc;
        try {
            rc = (int) ContextOps.DEALLOC_MW.invokeExact(deallocFn, pointer);
        } catch (Throwable t) {
            throw LibIbverbs.rethrow(t);
        }
        if (rc != 0) {
            throw new VerbsException("ibv_dealloc_mw", rc > 0 ? rc : Errno.EINVAL);
        }
    }
}
