package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.contrib.channel.rdma.internal.memory.ExternalRegion;
import io.netty.contrib.channel.rdma.internal.memory.RegisteredBuffer;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.RecvWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.SharedReceiveQueue;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsException;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

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
 * the device's {@code max_cqe} and the loop's limit; then the loop opens another group.
 *
 * <p>A slot whose message is large enough ({@link #lend}) may be <em>lent</em> to the reader instead of copied: the
 * reader gets a buffer over the slot itself, a receive from another slot takes its place at once (so the peer's
 * credit comes back as with a copy), and the slot is free again when the reader releases the buffer. The peer
 * cannot change those bytes: pool memory grants no remote access, and a completed receive is the receiver's. A
 * block goes back to the pool only when neither the group nor a lent buffer holds it ({@link Block}), so a
 * reader may keep a lent buffer past its connection, the SRQ and the loop. Lending stops at
 * {@link #LEND_SHARE} of the SRQ's capacity lent at once: then messages are copied, and a reader that keeps
 * everything pins no more than that.
 *
 * <p>Memory goes back when connections are gone ({@link #releaseMemory()}): once no connection has joined or left
 * for {@link RdmaIoHandlerConfig#memoryReleaseDelayMillis()}, the blocks of slots that are all free are released to
 * the pool, and the loop thread's cache of the pool is flushed (a cached slot keeps its chunk registered). A slot
 * posted in the SRQ cannot be taken back, so with no connection left the SRQ itself is destroyed (and created again
 * at the next join), which frees every slot, and the completion queue shrinks to its first size; while connections
 * remain, the receives departed peers left posted ({@code surplus}) are used up by the next messages, one each,
 * and their blocks go at a later look. Nothing of this is on the data path: it runs from a task the loop schedules
 * when a connection leaves.
 *
 * <p>Loop-thread confined, including the release task and the loop thread's cache it flushes.
 */
final class QueueGroup {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(QueueGroup.class);
    private static final int SLOTS_PER_BLOCK = 64;
    /** Completion queue entries beyond the SRQ's, as at creation: room for the send queues of the first joins. */
    private static final int CQ_SEND_ROOM = 1024;
    /** Receives re-posted per {@code ibv_post_srq_recv}. */
    private static final int POST_BATCH = 64;
    /** Receives posted beyond the credits, so that the one replacing a freed slot can be posted after the sends. */
    static final int AHEAD = 16;
    /** Slots lent at once, at most: the SRQ's capacity divided by this. */
    static final int LEND_SHARE = 4;

    final int index;
    final int slotSize;
    final CompletionQueue cq;
    /** Null between a {@link #releaseMemory()} that found no connection and the next {@link #join}. */
    SharedReceiveQueue srq;
    private final ProtectionDomain pd;
    private final RdmaByteBufAllocator alloc;
    /** The loop: lent slots come back on it. */
    private final ThreadAwareExecutor loop;
    private final int maxCqe;
    /** The SRQ size asked for, and the device's answer: the same for every SRQ this group creates. */
    private final int srqRequest;
    private final int srqWr;
    private final int firstCqe;
    private final long releaseDelayNanos;
    /** When a connection last joined or left: memory is released once this is {@link #releaseDelayNanos} ago. */
    private long lastChange;
    /**
     * The loop's polls at the last leave: the SRQ goes only after a later poll, which took every completion of the
     * departed queue pairs (a destroyed QP adds none), so no completion can name a slot after its block is gone.
     */
    private long pollsAtLeave;
    private RdmaIoHandlerMetric loopMetric;
    private boolean releaseScheduled;
    private boolean closed;
    private final RecvWorkRequests posts = new RecvWorkRequests(POST_BATCH, 1);
    private int pendingPosts;
    /** Whether the {@link #AHEAD} receives have been posted (at the first join). */
    private boolean ahead;

    /** Slot {@code s} lies in block {@code s / 64}; a released block leaves a null until a new block takes its place. */
    private Block[] blocks = new Block[4];
    private long[] blockAddress = new long[4];
    private int[] blockLkey = new int[4];
    /** Block indices in use: every block below is allocated or released. */
    private int blockLimit;
    private int liveBlocks;
    /** Slots lent to readers now ({@link #lend}). */
    private int lent;
    /** Slots of live blocks neither posted, prepared to be posted, nor holding a message. */
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
               RdmaIoHandlerConfig config, ThreadAwareExecutor loop, Runnable onChange) {
        this.index = index;
        this.loop = loop;
        this.onChange = onChange;
        this.slotSize = slotSize;
        this.pd = pd;
        this.alloc = alloc;
        this.releaseDelayNanos = TimeUnit.MILLISECONDS.toNanos(config.memoryReleaseDelayMillis());
        var device = pd.context().queryDevice();
        this.maxCqe = Math.min(config.completionQueueSize(), device.maxCqe());
        this.srqRequest = Math.min(config.sharedReceiveQueueSize(), device.maxSrqWr());
        SharedReceiveQueue q = null;
        CompletionQueue c = null;
        try {
            q = pd.createSrq(srqRequest, 1, 0);
            // Every receive the SRQ holds may complete at once; sends are reserved per connection.
            c = pd.context().createCq(Math.min(maxCqe, q.maxWr() + CQ_SEND_ROOM), channel, 0);
        } catch (RuntimeException e) {
            if (q != null) {
                q.close();
            }
            posts.close();
            throw e;
        }
        this.srq = q;
        this.cq = c;
        this.srqWr = q.maxWr();
        this.firstCqe = Math.min(maxCqe, srqWr + CQ_SEND_ROOM);
    }

    /**
     * Takes a connection with a send queue of {@code sqDepth} whose peer starts with {@code credits}; returns
     * {@code false} when this group has no room for it (the loop then opens another group).
     */
    boolean join(int sqDepth, int credits) {
        if (committed + credits > srqWr - AHEAD) {
            return false;
        }
        int needed = srqWr + sendEntries + sqDepth;
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
        if (srq == null) {
            srq = pd.createSrq(srqRequest, 1, 0);
            DeviceEvents.queueCreated(srq.address(), this);
        }
        sendEntries += sqDepth;
        connections++;
        lastChange = System.nanoTime();
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
     * held credits for (or was owed) stay posted for others. {@code loop} (this group's loop) runs
     * {@link #releaseMemory()} once no connection has come or gone for the release delay.
     */
    void leave(int sqDepth, int grant, int posted, EventExecutor loop) {
        sendEntries -= sqDepth;
        committed -= grant;
        surplus += posted;
        connections--;
        lastChange = System.nanoTime();
        if (loopMetric == null) {
            loopMetric = RdmaIoHandler.metric(loop);
        }
        pollsAtLeave = loopMetric.polls();
        scheduleRelease(loop, releaseDelayNanos);
        onChange.run();
    }

    private void scheduleRelease(EventExecutor loop, long delayNanos) {
        if (releaseScheduled || closed) {
            return;
        }
        releaseScheduled = true;
        loop.schedule(() -> releaseWhenQuiet(loop), delayNanos, TimeUnit.NANOSECONDS);
    }

    /** The release task: releases if the group has been quiet long enough, else looks again when it will have. */
    private void releaseWhenQuiet(EventExecutor loop) {
        releaseScheduled = false;
        if (closed) {
            return;
        }
        long quiet = System.nanoTime() - lastChange;
        if (quiet < releaseDelayNanos || loopMetric.polls() == pollsAtLeave) {
            scheduleRelease(loop, Math.max(releaseDelayNanos - quiet, TimeUnit.MILLISECONDS.toNanos(1)));
            return;
        }
        releaseMemory();
        if (surplus > 0) {
            // Receives departed peers left posted hold their blocks until messages use them up: look again later.
            scheduleRelease(loop, Math.max(releaseDelayNanos, TimeUnit.SECONDS.toNanos(1)));
        }
    }

    /**
     * Gives back what no connection needs: with no connection left the SRQ (its posted receives cannot be taken
     * back otherwise), every slot block and the completion queue's growth; else the blocks whose slots are all
     * free. Then flushes the loop thread's cache of the pool, which may pin chunks. Loop thread only; the release
     * task calls it, tests too.
     */
    void releaseMemory() {
        if (closed) {
            return;
        }
        if (connections == 0 && srq != null) {
            try {
                // No queue pair is on it any more (a connection leaves after destroying its QP), and the release
                // task waited for a poll after the last leave (pollsAtLeave).
                DeviceEvents.queueDestroyed(srq.address(), this);
                srq.close();
                srq = null;
            } catch (RuntimeException e) {
                logger.debug("kept the shared receive queue of {}: {}", this, e.toString());
            }
        }
        if (srq == null) {
            posted = 0;
            surplus = 0;
            pendingPosts = 0;
            ahead = false;
            freeCount = 0;
            for (int b = 0; b < blockLimit; b++) {
                releaseBlock(b);
            }
            blockLimit = 0;
        } else {
            releaseFreeBlocks();
        }
        shrinkCompletionQueue();
        alloc.trimCurrentThreadCache();
        onChange.run();
    }

    /** Releases every block whose slots are all in the free list, and drops those slots from it. */
    private void releaseFreeBlocks() {
        if (freeCount < SLOTS_PER_BLOCK) {
            return;
        }
        int[] freeInBlock = new int[blockLimit];
        for (int i = 0; i < freeCount; i++) {
            freeInBlock[free[i] / SLOTS_PER_BLOCK]++;
        }
        boolean released = false;
        for (int b = 0; b < blockLimit; b++) {
            if (freeInBlock[b] == SLOTS_PER_BLOCK) {
                releaseBlock(b);
                released = true;
            }
        }
        if (!released) {
            return;
        }
        int kept = 0;
        for (int i = 0; i < freeCount; i++) {
            if (blocks[free[i] / SLOTS_PER_BLOCK] != null) {
                free[kept++] = free[i];
            }
        }
        freeCount = kept;
        while (blockLimit > 0 && blocks[blockLimit - 1] == null) {
            blockLimit--;
        }
    }

    private void releaseBlock(int b) {
        if (blocks[b] != null) {
            blocks[b].unref();
            blocks[b] = null;
            liveBlocks--;
        }
    }

    /**
     * Back to the size the remaining connections need (at least the first size) when the queue has twice that:
     * a flood's connections grew it, and growing it again doubles it.
     */
    private void shrinkCompletionQueue() {
        int target = Math.min(maxCqe, Math.max(firstCqe, srqWr + sendEntries + CQ_SEND_ROOM));
        if (cq.cqe() >= 2L * target) {
            try {
                cq.resize(target);
            } catch (VerbsException e) {
                // It holds more completions than that right now: the next release tries again.
                logger.debug("could not shrink the completion queue of {}: {}", this, e.toString());
            }
        }
    }

    /** Bytes of receive slots this group holds from the pool. */
    long slotMemory() {
        return (long) liveBlocks * SLOTS_PER_BLOCK * slotSize;
    }

    /** Entries of the completion queue. */
    int completionQueueEntries() {
        return cq.cqe();
    }

    /** Completion queue entries that could be filled at once: every receive of the SRQ and every send queue. */
    int completionQueueReserved() {
        return srqWr + sendEntries;
    }

    /** Receive credits granted to the peers of this group's connections. */
    int creditsGranted() {
        return committed;
    }

    /** Credits that may still be granted to peers. */
    int room() {
        return srqWr - AHEAD - committed;
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

    /** Whether a message may be lent to its reader now rather than copied: fewer than the limit are lent. */
    boolean mayLend() {
        return lent < srqWr / LEND_SHARE;
    }

    /**
     * A buffer over {@code length} bytes at {@code address} in {@code slot}, whose message the connection is done
     * with but for this buffer: the slot is free again once the reader releases it. The caller posts a receive in
     * its place ({@link #repost()}).
     */
    ByteBuf lend(int slot, long address, int length) {
        int b = slot / SLOTS_PER_BLOCK;
        blocks[b].refs.incrementAndGet();
        lent++;
        return alloc.leakAware(blocks[b].buffer(alloc, address - blockAddress[b], length, slot));
    }

    /** A lent slot's buffer was released (loop thread): the slot is free, if its block is still the group's. */
    private void returned(Block block, int slot) {
        lent--;
        if (!closed && blocks[slot / SLOTS_PER_BLOCK] == block) {
            release(slot);
        }
        block.unref();
    }

    /** Slots lent to readers now. */
    int lentSlots() {
        return lent;
    }

    /** Address of the bytes of {@code slot}; checks that the slot exists (a completion names it). */
    long address(int slot) {
        if (slot < 0 || slot >= blockLimit * SLOTS_PER_BLOCK || blocks[slot / SLOTS_PER_BLOCK] == null) {
            throw new IllegalStateException("receive completion for unknown slot " + slot);
        }
        return blockAddress[slot / SLOTS_PER_BLOCK] + (long) (slot % SLOTS_PER_BLOCK) * slotSize;
    }

    /** With no free slot: a new block, in the first released block's place if any; its other slots go free. */
    private int newSlot() {
        int block = 0;
        while (block < blockLimit && blocks[block] != null) {
            block++;
        }
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
        blocks[block] = new Block(this, buf, (int) lkey);
        blockAddress[block] = buf.memoryAddress();
        blockLkey[block] = (int) lkey;
        liveBlocks++;
        if (block == blockLimit) {
            blockLimit++;
        }
        if (freeCount + SLOTS_PER_BLOCK > free.length) {
            free = Arrays.copyOf(free, Math.max(free.length * 2, freeCount + SLOTS_PER_BLOCK));
        }
        // Highest first, so that the block's slots are taken in order.
        int first = block * SLOTS_PER_BLOCK;
        for (int s = SLOTS_PER_BLOCK - 1; s > 0; s--) {
            free[freeCount++] = first + s;
        }
        return first;
    }

    /** Whether no connection uses the group any more. */
    boolean idle() {
        return connections == 0;
    }

    @Override
    public String toString() {
        return "QueueGroup{index=" + index + ", slotSize=" + slotSize + ", connections=" + connections
                + ", committed=" + committed + ", posted=" + posted + ", surplus=" + surplus
                + ", slots=" + liveBlocks * SLOTS_PER_BLOCK + ", lent=" + lent + ", cqe=" + cq.cqe()
                + ", sendEntries=" + sendEntries + '}';
    }

    /** Destroys the SRQ and the CQ and frees the slots; the QPs on them must be gone. */
    void close() {
        closed = true;
        try {
            if (srq != null) {
                srq.close();
            }
        } finally {
            try {
                cq.close();
            } finally {
                posts.close();
                for (int b = 0; b < blocks.length; b++) {
                    if (blocks[b] != null) {
                        blocks[b].unref();
                        blocks[b] = null;
                    }
                }
            }
        }
    }

    /**
     * A block of slots from the pool. It goes back to the pool when the group lets go of it and no lent buffer
     * over it is left, whichever comes last, on whatever thread.
     */
    private static final class Block extends ExternalRegion {
        private final QueueGroup group;
        private final ByteBuf buf;
        /** The group's hold, and one per lent buffer. */
        final AtomicInteger refs = new AtomicInteger(1);

        Block(QueueGroup group, ByteBuf buf, int lkey) {
            super(MemorySegment.ofAddress(buf.memoryAddress()).reinterpret(buf.capacity()), lkey, group.alloc.pool());
            this.group = group;
            this.buf = buf;
        }

        void unref() {
            if (refs.decrementAndGet() == 0) {
                buf.release();
            }
        }

        @Override
        protected void released(long slot) {
            if (group.loop.isExecutorThread(Thread.currentThread())) {
                group.returned(this, (int) slot);
                return;
            }
            try {
                group.loop.execute(() -> group.returned(this, (int) slot));
            } catch (RejectedExecutionException e) {
                // The loop has stopped, and the group with it: only the memory is left to free.
                unref();
            }
        }
    }
}
