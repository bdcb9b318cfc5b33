package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.RecvWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.SharedReceiveQueue;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;

import java.util.Arrays;

/**
 * One loop's completion queue and the shared receive queue (SRQ) whose receives complete on it, serving the
 * loop's connections of one device and one receive slot size. Memory follows traffic: a connection costs its
 * grant of receive slots (a few while idle, more while it is busy, see
 * {@link io.netty.contrib.channel.rdma.internal.protocol.ReceiveWindow}), not a private set of buffers.
 *
 * <p>Slots are posted so that every credit a peer holds has a posted buffer behind it ({@code committed <=
 * posted}): a peer that respects its credits never meets RNR. Slot memory comes from the registered pool in
 * blocks and is kept for reuse.
 *
 * <p>{@link #AHEAD} receives are posted beyond the credits: a slot freed while the loop handles a message is then
 * owed to its peer at once, backed by one of them, and the {@code ibv_post_srq_recv} that replaces it waits until
 * the loop has sent what it had to send, and under traffic until eight are prepared ({@link #flushDue()}). A send
 * posts the prepared receives first only when more are prepared than there are receives ahead
 * ({@link #beforeSend()}).
 *
 * <p>The completion queue never overruns: it has room for every receive the SRQ can complete (its capacity) plus
 * the send queue depth of every connection on it, and it grows ({@code ibv_resize_cq}) as connections join, up to
 * the device's {@code max_cqe} and the loop's limit; then the loop opens another group. Loop-thread confined.
 */
final class QueueGroup {
    private static final int SLOTS_PER_BLOCK = 64;
    /** Receives re-posted per {@code ibv_post_srq_recv}. */
    private static final int POST_BATCH = 64;
    /** Receives posted beyond the credits, so that the one replacing a freed slot can be posted after the sends. */
    static final int AHEAD = 16;

    final int index;
    final int slotSize;
    final CompletionQueue cq;
    final SharedReceiveQueue srq;
    private final RdmaByteBufAllocator alloc;
    private final int maxCqe;
    private final RecvWorkRequests posts = new RecvWorkRequests(POST_BATCH, 1);
    private int pendingPosts;
    /** Whether the {@link #AHEAD} receives have been posted (at the first join). */
    private boolean ahead;

    private ByteBuf[] blocks = new ByteBuf[4];
    private long[] blockAddress = new long[4];
    private int[] blockLkey = new int[4];
    private int slots;
    private int[] free = new int[SLOTS_PER_BLOCK];
    private int freeCount;
    /** Receives posted in the SRQ and not yet completed. */
    private int posted;
    /**
     * The grants of the connections on this group: credits their peers hold, credits owed to them, messages not
     * yet freed. The SRQ holds a receive for each of the first two, so this never exceeds its capacity.
     */
    private int committed;
    /** Posted receives no peer holds a credit for (left by connections that closed): used before posting more. */
    private int surplus;
    /** Send queue entries of the connections on this group's CQ. */
    private int sendEntries;
    /** Told when connections join or leave (the loop's metric). */
    private final Runnable onChange;
    private int connections;

    QueueGroup(int index, ProtectionDomain pd, CompletionChannel channel, RdmaByteBufAllocator alloc, int slotSize,
               RdmaIoHandlerConfig config, Runnable onChange) {
        this.index = index;
        this.onChange = onChange;
        this.slotSize = slotSize;
        this.alloc = alloc;
        var device = pd.context().queryDevice();
        this.maxCqe = Math.min(config.completionQueueSize(), device.maxCqe());
        int srqSize = Math.min(config.sharedReceiveQueueSize(), device.maxSrqWr());
        SharedReceiveQueue q = null;
        CompletionQueue c = null;
        try {
            q = pd.createSrq(srqSize, 1, 0);
            // Every receive the SRQ holds may complete at once; sends are reserved per connection.
            c = pd.context().createCq(Math.min(maxCqe, q.maxWr() + 1024), channel, 0);
        } catch (RuntimeException e) {
            if (q != null) {
                q.close();
            }
            posts.close();
            throw e;
        }
        this.srq = q;
        this.cq = c;
    }

    /**
     * Takes a connection with a send queue of {@code sqDepth} whose peer starts with {@code credits}; returns
     * {@code false} when this group has no room for it (the loop then opens another group).
     */
    boolean join(int sqDepth, int credits) {
        if (committed + credits > srq.maxWr() - AHEAD) {
            return false;
        }
        int needed = srq.maxWr() + sendEntries + sqDepth;
        if (needed > cq.cqe()) {
            if (needed > maxCqe) {
                return false;
            }
            try {
                cq.resize(Math.min(maxCqe, Math.max(needed, 2 * cq.cqe())));
            } catch (VerbsException e) {
                return false;
            }
        }
        sendEntries += sqDepth;
        connections++;
        if (!ahead) {
            ahead = true;
            post(AHEAD);
        }
        raise(credits);
        flush();
        onChange.run();
        return true;
    }

    /**
     * A connection left: its send entries and its grant are free again, and the {@code posted} receives its peer
     * held credits for (or was owed) stay posted for others.
     */
    void leave(int sqDepth, int grant, int posted) {
        sendEntries -= sqDepth;
        committed -= grant;
        surplus += posted;
        connections--;
        onChange.run();
    }

    /** Entries of the completion queue. */
    int completionQueueEntries() {
        return cq.cqe();
    }

    /** Completion queue entries that could be filled at once: every receive of the SRQ and every send queue. */
    int completionQueueReserved() {
        return srq.maxWr() + sendEntries;
    }

    /** Receive credits granted to the peers of this group's connections. */
    int creditsGranted() {
        return committed;
    }

    /** Credits that may still be granted to peers. */
    int room() {
        return srq.maxWr() - AHEAD - committed;
    }

    /** Adds {@code credits} to a peer's grant, at most {@link #room()}: posts a receive for each. */
    void raise(int credits) {
        committed += credits;
        post(credits);
    }

    /** Posts a receive for a credit whose message was freed (its receive completed before). */
    void repost() {
        post(1);
    }

    private void post(int count) {
        int reused = Math.min(surplus, count);
        surplus -= reused;
        for (int n = reused; n < count; n++) {
            int slot = freeCount > 0 ? free[--freeCount] : newSlot();
            int block = slot / SLOTS_PER_BLOCK;
            posts.setAddress(pendingPosts++, WrId.encode(index, WrId.RECV, slot),
                    blockAddress[block] + (long) (slot % SLOTS_PER_BLOCK) * slotSize, slotSize, blockLkey[block]);
            if (pendingPosts == POST_BATCH) {
                flush();
            }
        }
    }

    /**
     * Before a send that may carry credits: posts the prepared receives if the receives {@link #AHEAD} do not back
     * them all.
     */
    void beforeSend() {
        if (pendingPosts > AHEAD) {
            flush();
        }
    }

    /**
     * Whether enough receives are prepared to post them now, while completions keep coming: half of
     * {@link #AHEAD}. Fewer wait (for the loop's next empty poll, or a send: {@link #beforeSend()}), backed by the
     * receives ahead, and a message's {@code ibv_post_srq_recv} is shared by eight.
     */
    boolean flushDue() {
        return pendingPosts >= AHEAD / 2;
    }

    /** Posts the receives prepared since the last call (the loop calls it after its polls, {@link #flushDue()}). */
    void flush() {
        int n = pendingPosts;
        if (n > 0) {
            pendingPosts = 0;
            srq.postRecv(posts, 0, n);
            posted += n;
        }
    }

    /** A receive of this SRQ completed: the slot is its connection's until {@link #release(int)}. */
    void completed() {
        posted--;
    }

    /**
     * A receive of this SRQ completed for a connection that is gone (or closing, beyond what it was granted): it
     * used one its peer held no credit for, a surplus one if there is any, else one posted for another peer's
     * credit, which is posted again.
     */
    void orphaned() {
        if (surplus > 0) {
            surplus--;
        } else {
            repost();
        }
    }

    /** The connection is done with the bytes of {@code slot}. */
    void release(int slot) {
        if (freeCount == free.length) {
            free = Arrays.copyOf(free, free.length * 2);
        }
        free[freeCount++] = slot;
    }

    /** Address of the bytes of {@code slot}; checks that the slot exists (a completion names it). */
    long address(int slot) {
        if (slot < 0 || slot >= slots) {
            throw new IllegalStateException("receive completion for unknown slot " + slot);
        }
        return blockAddress[slot / SLOTS_PER_BLOCK] + (long) (slot % SLOTS_PER_BLOCK) * slotSize;
    }

    private int newSlot() {
        int block = slots / SLOTS_PER_BLOCK;
        if (slots % SLOTS_PER_BLOCK == 0) {
            if (block == blocks.length) {
                blocks = Arrays.copyOf(blocks, block * 2);
                blockAddress = Arrays.copyOf(blockAddress, block * 2);
                blockLkey = Arrays.copyOf(blockLkey, block * 2);
            }
            int bytes = SLOTS_PER_BLOCK * slotSize;
            ByteBuf buf = alloc.directBuffer(bytes, bytes);
            long lkey = RegisteredBuffer.lkey(buf, alloc.pool());
            if (lkey == RegisteredBuffer.NOT_REGISTERED) {
                buf.release();
                throw new IllegalStateException("the pool of " + alloc + " handed out unregistered memory");
            }
            blocks[block] = buf;
            blockAddress[block] = buf.memoryAddress();
            blockLkey[block] = (int) lkey;
        }
        return slots++;
    }

    /** Whether no connection uses the group any more. */
    boolean idle() {
        return connections == 0;
    }

    @Override
    public String toString() {
        return "QueueGroup{index=" + index + ", slotSize=" + slotSize + ", connections=" + connections
                + ", committed=" + committed + ", posted=" + posted + ", surplus=" + surplus + ", slots=" + slots + ", cqe=" + cq.cqe()
                + ", sendEntries=" + sendEntries + '}';
    }

    /** Destroys the SRQ and the CQ and frees the slots; the QPs on them must be gone. */
    void close() {
        try {
            srq.close();
        } finally {
            try {
                cq.close();
            } finally {
                posts.close();
                for (int b = 0; b < blocks.length; b++) {
                    if (blocks[b] != null) {
                        blocks[b].release();
                        blocks[b] = null;
                    }
                }
            }
        }
    }
}
