package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.FileRegion;
import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.SendWindow;

import java.io.IOException;

/**
 * Turns a channel's flushed writes into work requests within what the peer offered (docs/PROTOCOL.md): SENDs of
 * up to the peer's receive slot, each taking one of its receive credits; writes larger than a slot as RDMA WRITE
 * WITH IMMEDIATE into the peer's receive ring, in parts of up to a slab of it, when it offers one (else as
 * SENDs, asking for a ring), each ring write gathering the writes that follow from where they lie (up to
 * {@link #MAX_GATHER} buffers, as a socket's writev does); mid-size writes that follow one another gathered into
 * ring writes the same way (a backlog of them asks for a ring); small writes copied together
 * ({@link RdmaChannelOption#WRITE_COALESCE_THRESHOLD}) into one SEND, or, while a backlog of them is larger than a
 * slot and the peer's ring has room, into one ring write of up to a slab (a backlog asks for a ring);
 * file regions read in parts ({@link FileRegionChunker}). Every message's header carries what this side owes
 * the peer ({@link Owed}). Loop-thread confined.
 */
final class Sender {
    /**
     * Buffers one ring write gathers from, at most (one SGE each; fewer when the device allows fewer): an HTTP/2
     * stream of 16 KiB DATA frames, each a 9-byte header and its payload, goes 4 frames per work request. Every
     * send queue entry of every connection has room for this many SGEs (on mlx5, 8 fit the 192-byte entry that
     * 128 bytes of inline data take anyway; 16 would need 320), so more costs memory per idle connection.
     */
    static final int MAX_GATHER = 8;
    /**
     * Mid-size writes (above the coalescing threshold, within a slot) ask the peer for a ring once this many
     * slots' worth of bytes wait behind them: a stream, not a request and its reply.
     */
    static final int RING_BACKLOG_SLOTS = 4;
    /**
     * Small writes are copied into ring writes (while a backlog of them is larger than a slot) when a receive slot
     * takes fewer than this many of them: a SEND of 8 KiB then carries 15 writes of 512 B or 7 of 1 KiB, where a
     * ring write of a 64 KiB slab carries 127 or 63. Smaller writes already share a SEND by the hundred, and the
     * receiver's work per slab (invalidate it, deliver it, bind it again) costs more than the SENDs it saves
     * (docs/benchmarks/fresh-buffers.md).
     */
    static final int RING_COALESCE_SLOT_SHARE = 16;

    /** What this side owes the peer, carried in the header of every message it sends. */
    interface Owed {
        /** Receive credits granted since the last message: their receives are posted. */
        int takeReceiveCredits();

        /** Slabs of this side's ring bound again since the last message, bit k for slab k. */
        int takeReturnedSlabs();
    }

    private final SendQueue sends;
    private final RdmaByteBufAllocator alloc;
    private final ConnectionCounters counters;
    private final Owed owed;
    /** Writes up to this size are copied together. */
    private final int coalesceThreshold;
    private final MessageHeader header = new MessageHeader();
    private final FileRegionChunker files;
    private final Lookahead lookahead = new Lookahead();
    private final Copier copier = new Copier();
    private final Sizer sizer = new Sizer();
    private final Gather gather;

    /** The peer's credits; null until the connection is established. */
    private SendWindow window;
    /**
     * Receive credits the peer granted in messages that arrived before this side saw the connection established
     * (a client's ESTABLISHED event may come after the server's first sends); {@link #start} adds them.
     */
    private int earlyReceiveCredits;
    private int peerMaxSend;
    private long peerRingAddress;
    /** The largest ring write: a slab of the peer's ring; 0 while it offers none. */
    private int maxRingWrite;
    private final int[] ringRkeys = new int[Immediate.MAX_SLABS];
    private boolean peerRingGeneration;
    /** This side took a RING message of the peer and has not told it yet ({@link MessageHeader#FLAG_RING_SEEN}). */
    private boolean ringSeenOwed;
    /** Inside {@link #write}: writes' promises complete as their bytes are taken, and a listener may close. */
    private boolean writing;
    private boolean released;

    Sender(SendQueue sends, RdmaByteBufAllocator alloc, ConnectionCounters counters, Owed owed,
           int coalesceThreshold) {
        this.sends = sends;
        this.alloc = alloc;
        this.counters = counters;
        this.owed = owed;
        this.coalesceThreshold = coalesceThreshold;
        this.files = new FileRegionChunker(alloc);
        this.gather = new Gather(sends.maxGather());
        sends.onSeal(this::sealed);
    }

    /** The last ring write posted leaves its slab ({@link SendQueue}). */
    private void sealed() {
        window.seal();
    }

    /** Takes what the peer offered at connect time; sending may start. */
    void start(ConnectParameters peer) {
        window = new SendWindow(peer.recvCredits());
        window.grant(earlyReceiveCredits, 0);
        earlyReceiveCredits = 0;
        peerMaxSend = peer.recvBufferSize() - MessageHeader.LENGTH;
    }

    /** The peer's receive slot: the largest SEND it takes, header included. */
    int peerSlotSize() {
        return peerMaxSend + MessageHeader.LENGTH;
    }

    boolean started() {
        return window != null;
    }

    /** Credits the peer returned in a message's header. */
    void granted(int receiveCredits, int returnedSlabs) {
        if (window != null) {
            window.grant(receiveCredits, returnedSlabs);
        } else if (returnedSlabs != 0) {
            throw new ProtocolException("ring slabs returned before the connection was established");
        } else {
            earlyReceiveCredits += receiveCredits;
        }
    }

    /** The peer replaced or withdrew its receive ring (a RING message): later writes go there, or by SEND. */
    void peerRingSwitched(MessageHeader ring) {
        if (window == null) {
            throw new ProtocolException("RING message before the connection was established");
        }
        long size = ring.ringSize();
        int slabs = ring.ringSlabs();
        for (int k = 0; k < slabs; k++) {
            ringRkeys[k] = ring.ringRkey(k);
        }
        window.switchRing(size, slabs, ringRkeys, (ring.ringFlags() & MessageHeader.RING_FIXED_RKEYS) != 0);
        peerRingAddress = ring.ringAddress();
        maxRingWrite = (int) window.maxRingWrite();
        peerRingGeneration = !peerRingGeneration;
        ringSeenOwed = true;
    }

    /** Whether this side must tell the peer it saw its RING, with a CREDIT if nothing else goes. */
    boolean ringSeenOwed() {
        return ringSeenOwed;
    }

    /**
     * Posts as much of {@code in}'s flushed data as credits and the send queue allow, in one doorbell per batch of
     * work requests.
     *
     * @return {@code true} when everything flushed was posted
     */
    boolean write(ChannelOutboundBuffer in) throws IOException {
        writing = true;
        try {
            for (;;) {
                if (released) {
                    // A promise's listener closed the channel and the connection is gone (its peer left).
                    return true;
                }
                Object msg = in.current();
                if (msg == null) {
                    return true;
                }
                if (msg instanceof FileRegion region) {
                    if (!writeFilePart(in, region)) {
                        return false;
                    }
                    continue;
                }
                ByteBuf buf = (ByteBuf) msg;
                int readable = buf.readableBytes();
                if (readable == 0) {
                    in.remove();
                    continue;
                }
                if (sends.batchFull()) {
                    sends.post();
                }
                if (sends.room() <= 0) {
                    return false;
                }
                boolean ring = readable > peerMaxSend && maxRingWrite > 0;
                if (!ring && readable <= coalesceThreshold && readable <= peerMaxSend && in.size() > 1) {
                    lookAhead(in);
                    if (lookahead.smalls >= 2) {
                        if (!coalesce(in, readable)) {
                            return false;
                        }
                        continue;
                    }
                    // One small write before a large one: it rides at the head of the large one's ring write.
                    ring = lookahead.largeFollows && maxRingWrite > peerMaxSend;
                } else if (!ring && readable > coalesceThreshold && maxRingWrite > peerMaxSend && in.size() > 1) {
                    // Mid-size writes one after another (a stream of 4 KiB messages): gathered into ring writes
                    // from where they lie, several per work request and credit, rather than one SEND each.
                    ring = true;
                }
                if (ring) {
                    // A stream of mid-size writes leaves the small writes after it to be coalesced.
                    boolean midSize = readable > coalesceThreshold && readable <= peerMaxSend;
                    if (!gatherRingWrite(in, null, 0, midSize ? coalesceThreshold : 0)) {
                        return false;
                    }
                    continue;
                }
                int chunk = Math.min(readable, peerMaxSend);
                // A write larger than a slot, or a backlog of mid-size ones, and no ring to write to: ask for one.
                boolean wantsRing = readable > peerMaxSend || readable > coalesceThreshold && maxRingWrite == 0
                        && in.size() > 1 && in.totalPendingWriteBytes() >= RING_BACKLOG_SLOTS * (long) peerMaxSend;
                if (!send(buf, chunk, wantsRing ? MessageHeader.FLAG_WANTS_RING : 0)) {
                    return false;
                }
                counters.bytesWritten += chunk;
                counters.progressed();
                in.removeBytes(chunk);
            }
        } finally {
            writing = false;
            if (!released) {
                sends.post();
            }
        }
    }

    /** Sends the next part of a {@link FileRegion}; a part read but not sent for lack of credit waits. */
    private boolean writeFilePart(ChannelOutboundBuffer in, FileRegion region) throws IOException {
        long remaining = region.count() - region.transferred();
        ByteBuf part = files.next(region, remaining > peerMaxSend && maxRingWrite > 0 ? maxRingWrite : peerMaxSend);
        if (part == null) {
            in.remove();
            return true;
        }
        int length = part.readableBytes();
        if (sends.batchFull()) {
            sends.post();
        }
        if (sends.room() <= 0) {
            return false;
        }
        boolean prepared = length > peerMaxSend && maxRingWrite > 0 ? ringWrite(part, length)
                : send(part, length, 0);
        if (!prepared) {
            return false;
        }
        files.sent();
        counters.bytesWritten += length;
        counters.progressed();
        in.progress(length);
        if (region.transferred() >= region.count()) {
            in.remove();
        }
        return true;
    }

    /** Looks at how the flush starts: two small writes, or one before a large write ({@link Lookahead}). */
    private void lookAhead(ChannelOutboundBuffer in) {
        lookahead.reset();
        forEachFlushed(in, lookahead);
    }

    private static void forEachFlushed(ChannelOutboundBuffer in, ChannelOutboundBuffer.MessageProcessor p) {
        try {
            in.forEachFlushedMessage(p);
        } catch (Exception e) {
            throw new IllegalStateException(e); // the processors throw nothing
        }
    }

    /**
     * Sends the writes at the head of the flush, after {@code head} bytes of {@code staging} if given, as one ring
     * write gathered from where they lie: as many as fit a slab of the peer's ring and {@link #MAX_GATHER}
     * buffers, the last one possibly in part; after the first, a write of at most {@code smallLimit} bytes ends it.
     * Completes their promises.
     *
     * @return {@code false} when out of credit or ring space (nothing was taken from {@code in})
     */
    private boolean gatherRingWrite(ChannelOutboundBuffer in, ByteBuf staging, int head, int smallLimit) {
        gather.reset(maxRingWrite - head, staging == null ? 0 : 1, smallLimit);
        forEachFlushed(in, gather);
        int total = head + gather.bytes;
        if (staging == null && !window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        long offset = window.tryReserveRing(total);
        if (offset < 0) {
            gather.clear();
            if (staging == null) {
                window.releaseUnused();
                counters.stalled();
            }
            return false;
        }
        sends.ringWrite(Immediate.encode(total, window.lastSlab(), false, peerRingGeneration),
                peerRingAddress + offset, window.lastRkey(), window.windows());
        if (staging != null) {
            sends.gather(staging, head);
        }
        for (int k = 0; k < gather.count; k++) {
            sends.gather(gather.bufs[k], gather.lengths[k]);
        }
        gather.clear();
        counters.ringWrites++;
        counters.bytesWritten += total;
        counters.progressed();
        in.removeBytes(total - head);
        return true;
    }

    /** Picks the flushed writes one ring write takes: whole while they fit, the last one in part. */
    private static final class Gather implements ChannelOutboundBuffer.MessageProcessor {
        final ByteBuf[] bufs;
        final int[] lengths;
        int count;
        int bytes;
        private int budget;
        private int maxCount;
        /** After the first buffer, a write of at most this many bytes ends the gather (0: none does). */
        private int smallLimit;

        Gather(int maxGather) {
            bufs = new ByteBuf[maxGather];
            lengths = new int[maxGather];
        }

        /** {@code budget} bytes at most, in as many buffers as the queue allows less {@code reserved}. */
        void reset(int budget, int reserved, int smallLimit) {
            this.smallLimit = smallLimit;
            this.budget = budget;
            this.maxCount = bufs.length - reserved;
            count = 0;
            bytes = 0;
        }

        @Override
        public boolean processMessage(Object msg) {
            if (!(msg instanceof ByteBuf buf)) {
                return false;
            }
            int n = buf.readableBytes();
            if (n == 0) {
                return true; // taken off the outbound buffer with the others
            }
            if (count > 0 && n <= smallLimit) {
                return false;
            }
            int take = Math.min(n, budget - bytes);
            bufs[count] = buf;
            lengths[count] = take;
            count++;
            bytes += take;
            return take == n && bytes < budget && count < maxCount;
        }

        void clear() {
            for (int k = 0; k < count; k++) {
                bufs[k] = null;
            }
            count = 0;
        }
    }

    /** Looks at the first two messages of a flush: small writes, and whether a large one comes after the first. */
    private final class Lookahead implements ChannelOutboundBuffer.MessageProcessor {
        int smalls;
        boolean largeFollows;

        void reset() {
            smalls = 0;
            largeFollows = false;
        }

        @Override
        public boolean processMessage(Object msg) {
            if (msg instanceof ByteBuf buf) {
                int n = buf.readableBytes();
                if (n <= coalesceThreshold && n <= peerMaxSend) {
                    return ++smalls < 2;
                }
                largeFollows = n > peerMaxSend;
            }
            return false;
        }
    }

    /**
     * Copies the small writes at the head of the flush into one registered buffer, then takes them off the
     * outbound buffer: their promises complete and the application's buffers are released, the copy being the
     * connection's now (as a socket's write completes once the kernel has the bytes). While a backlog of flushed
     * writes is larger than the peer's receive slot, its ring has room, and {@code first}, the size of the first
     * write, is more than a {@link #RING_COALESCE_SLOT_SHARE}th of a slot, the copy takes up to a slab of the ring
     * and goes as one ring write: a stream of small messages then costs one work request, one receive credit and one
     * completion at the peer per slab rather than per slot; when the ring is full, such a backlog waits for a slab to
     * come back. Otherwise the copy takes what fits a SEND; if a large
     * write follows and the peer's ring has room, it travels at the head of that write's (first) ring write, two
     * buffers in one work request; else as one SEND, which asks the peer for a ring when a backlog of small writes
     * waits behind it. Stops at the first write that is larger than the threshold, does not fit, or is not a
     * buffer: it goes next, in order.
     *
     * @return {@code false} when out of credit, or of ring room for a backlog larger than a slot (nothing was taken
     *         from {@code in})
     */
    private boolean coalesce(ChannelOutboundBuffer in, int first) {
        if (!window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        boolean ringSized = first * (long) RING_COALESCE_SLOT_SHARE > peerMaxSend;
        int capacity = peerMaxSend;
        if (ringSized && maxRingWrite > peerMaxSend) {
            long room = window.ringRoom();
            if (room > peerMaxSend) {
                // The small writes flushed, up to the room there is: a ring write of them if more than a slot.
                sizer.reset((int) Math.min(room, maxRingWrite), Integer.MAX_VALUE);
                forEachFlushed(in, sizer);
                if (sizer.bytes > peerMaxSend) {
                    capacity = sizer.bytes;
                }
            } else {
                sizer.reset(Integer.MAX_VALUE, peerMaxSend);
                forEachFlushed(in, sizer);
                if (sizer.bytes > peerMaxSend) {
                    // More than a slot waits and the ring is full: wait for a slab to come back. SENDs of a slot
                    // each would take the receive credits the ring writes need, and cost the peer a copy per slot.
                    window.releaseUnused();
                    counters.stalled();
                    return false;
                }
            }
        }
        ByteBuf staging = alloc.directBuffer(capacity, capacity);
        try {
            copier.reset(staging);
            forEachFlushed(in, copier);
            int writes = copier.writes;
            Object next = copier.stoppedAt;
            copier.reset(null);
            int head = takeCopied(in, staging.readableBytes());
            if (head < staging.readableBytes()) {
                // A listener closed the channel: the writes after it failed, and their copies stay behind.
                staging.writerIndex(staging.readerIndex() + head);
            }
            counters.coalescedWrites += writes;
            counters.coalescedSends++;
            counters.progressed();
            if (released || head == 0) {
                window.releaseUnused();
                return true;
            }
            if (head > peerMaxSend) {
                long offset = window.tryReserveRing(head);
                if (offset < 0) {
                    throw new IllegalStateException("ring room for " + head + " bytes vanished: " + window);
                }
                sends.ringWrite(Immediate.encode(head, window.lastSlab(), false, peerRingGeneration),
                        peerRingAddress + offset, window.lastRkey(), window.windows());
                sends.gather(staging, head);
                counters.ringWrites++;
                counters.bytesWritten += head;
                return true;
            }
            if (next instanceof ByteBuf large && large.readableBytes() > peerMaxSend && maxRingWrite > head
                    && in.current() == next && gatherRingWrite(in, staging, head, 0)) {
                // The copied writes ride at the head of the large write's ring write.
                return true;
            }
            // Netty's pending bytes count its entries' overhead too: an upper bound of the backlog.
            boolean wantsRing = ringSized && maxRingWrite == 0
                    && in.totalPendingWriteBytes() - head >= RING_BACKLOG_SLOTS * (long) peerMaxSend;
            writeHeader(MessageHeader.TYPE_DATA, wantsRing ? MessageHeader.FLAG_WANTS_RING : 0);
            sends.send(staging, head);
            counters.bytesWritten += head;
            counters.sends++;
        } finally {
            staging.release(); // the send holds its own reference until it completes
        }
        return true;
    }

    /**
     * Takes the writes {@link #copier} copied, {@code copied} bytes in all, off the outbound buffer, one by one:
     * their promises complete and their buffers are released. A listener may close the channel, which fails the
     * writes after it (the channel lingers while this call writes, {@link #idle()}, unless the peer is gone,
     * {@link #released}). Returns the bytes of the writes taken: those whose copies are to be sent.
     */
    private static int takeCopied(ChannelOutboundBuffer in, int copied) {
        int bytes = 0;
        while (bytes < copied && in.current() instanceof ByteBuf buf) {
            bytes += buf.readableBytes();
            in.remove();
        }
        return bytes;
    }

    /**
     * Adds up the flushed writes {@link Copier} would copy into a buffer of {@code budget} bytes; stops early once
     * the sum is above {@code enough}.
     */
    private final class Sizer implements ChannelOutboundBuffer.MessageProcessor {
        private int budget;
        private int enough;
        int bytes;

        void reset(int budget, int enough) {
            this.budget = budget;
            this.enough = enough;
            bytes = 0;
        }

        @Override
        public boolean processMessage(Object msg) {
            if (msg instanceof ByteBuf buf) {
                int n = buf.readableBytes();
                if (n <= coalesceThreshold && n <= budget - bytes) {
                    bytes += n;
                    return bytes <= enough;
                }
            }
            return false;
        }
    }

    /** Copies the flushed writes into a staging buffer while they are small and fit ({@link #coalesce}). */
    private final class Copier implements ChannelOutboundBuffer.MessageProcessor {
        private ByteBuf staging;
        int writes;
        /** The message that ended the copy, or null when the flushed messages ran out. */
        Object stoppedAt;

        void reset(ByteBuf staging) {
            this.staging = staging;
            writes = 0;
            stoppedAt = null;
        }

        @Override
        public boolean processMessage(Object msg) {
            if (msg instanceof ByteBuf buf) {
                int n = buf.readableBytes();
                if (n <= coalesceThreshold && n <= staging.writableBytes()) {
                    staging.writeBytes(buf, buf.readerIndex(), n);
                    writes++;
                    return true;
                }
            }
            stoppedAt = msg;
            return false;
        }
    }

    private boolean send(ByteBuf buf, int length, int flags) {
        if (!window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        writeHeader(MessageHeader.TYPE_DATA, flags);
        sends.send(buf, length);
        counters.sends++;
        return true;
    }

    private boolean ringWrite(ByteBuf buf, int length) {
        if (!window.tryAcquireMessage()) {
            counters.stalled();
            return false;
        }
        long offset = window.tryReserveRing(length);
        if (offset < 0) {
            window.releaseUnused();
            counters.stalled();
            return false;
        }
        counters.ringWrites++;
        sends.ringWrite(Immediate.encode(length, window.lastSlab(), false, peerRingGeneration),
                peerRingAddress + offset, window.lastRkey(), window.windows());
        sends.gather(buf, length);
        return true;
    }

    /** Posts SHUTDOWN; {@code false} when out of credit or send queue room (retry after completions). */
    boolean shutdownOutput() {
        if (window == null || sends.room() <= 0 || !window.tryAcquireMessage()) {
            return false;
        }
        writeHeader(MessageHeader.TYPE_SHUTDOWN, 0);
        sends.send(null, 0);
        sends.post();
        return true;
    }

    /**
     * Takes the peer's credit for a message of this side's own (CREDIT or RING), which may use the credit that
     * data leaves in reserve ({@link SendWindow}): credits can always be returned.
     */
    boolean tryAcquireControlMessage() {
        return window.tryAcquireCreditMessage();
    }

    /** Gives back the credit of a control message that is not sent after all. */
    void releaseControlMessage() {
        window.releaseUnused();
    }

    /** Posts a CREDIT message: what this side owes, and nothing else. Needs send room and a control credit. */
    void sendCredit() {
        writeHeader(MessageHeader.TYPE_CREDIT, 0);
        sends.send(null, 0);
        sends.post();
    }

    /**
     * Fills the header of a RING message: receive credits, but no slabs, which the peer would take for slabs of
     * the new ring. Needs send room and a control credit.
     */
    void writeRingHeader() {
        sends.nextHeader(header).write(MessageHeader.TYPE_RING, ringSeenFlag(), owed.takeReceiveCredits(), 0);
    }

    /** Fills the next send's header, with the credits and flags this side owes the peer. */
    private void writeHeader(byte type, int flags) {
        int receiveCredits = owed.takeReceiveCredits();
        int returnedSlabs = owed.takeReturnedSlabs();
        sends.nextHeader(header).write(type, flags | ringSeenFlag(), receiveCredits, returnedSlabs);
    }

    private int ringSeenFlag() {
        if (ringSeenOwed) {
            ringSeenOwed = false;
            return MessageHeader.FLAG_RING_SEEN;
        }
        return 0;
    }

    /**
     * No send is waiting for its completion, and none is being prepared: a channel closed from a promise listener
     * while {@link #write} runs lingers until what that call posts has gone out.
     */
    boolean idle() {
        return !writing && sends.idle();
    }

    /** The connection is gone: stop writing, free the file part read ahead. */
    void release() {
        released = true;
        files.release();
    }

    @Override
    public String toString() {
        return "window=" + window;
    }
}
