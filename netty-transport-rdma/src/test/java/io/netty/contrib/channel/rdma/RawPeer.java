package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.MessageHeader;
import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.IbvAccessFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvSendFlags;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWcStatus;
import io.netty.contrib.channel.rdma.internal.verbs.IbvWrOpcode;
import io.netty.contrib.channel.rdma.internal.verbs.MemoryRegion;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.RecvWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.SendWorkRequests;
import io.netty.contrib.channel.rdma.internal.verbs.WorkCompletions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A peer written against raw verbs and rdma_cm that speaks as much of docs/PROTOCOL.md as a test needs, and can
 * break it: connects with valid parameters (4 receive slots of 1 KiB), asks for the server's ring, and posts
 * whatever writes the test wants. Its own thread; nothing here runs on an event loop.
 */
final class RawPeer implements AutoCloseable {
    static final int SLOTS = 4;
    private static final int SLOT = 1024;
    /** Bytes of local memory to write from. */
    static final int PAYLOAD = 64 << 10;
    private static final long RECV_BASE = PAYLOAD;

    private final Arena arena = Arena.ofShared();
    private final CmEventChannel channel = CmEventChannel.create();
    private final CmId id;
    private final SendWorkRequests sends = new SendWorkRequests(1, 1);
    private final WorkCompletions wcs = new WorkCompletions(4);
    private final MemorySegment memory = arena.allocate(PAYLOAD + SLOTS * SLOT, 4096);
    private final MessageHeader header = new MessageHeader();
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private QueuePair qp;
    private MemoryRegion mr;
    private long nextWrId = 1;
    long ringAddress;
    long ringSize;
    /** The rkey of each slab of the ring, as the RING message gave them. */
    int[] ringRkeys = new int[0];
    long slabSize;

    RawPeer(InetSocketAddress server) {
        this(server, SLOTS);
    }

    /**
     * Connects announcing {@code credits} receive credits while posting {@link #SLOTS} receives: with more, the
     * server's sends beyond the receives are answered with RNR NAKs, and retried forever (RNR retry 7).
     */
    RawPeer(InetSocketAddress server, int credits) {
        id = channel.createId();
        id.resolveAddr(null, server, 2000);
        expect(CmEventType.ADDR_RESOLVED).ack();
        id.resolveRoute(2000);
        expect(CmEventType.ROUTE_RESOLVED).ack();
        pd = id.verbs().allocPd();
        cq = id.verbs().createCq(16, null, 0);
        qp = id.createQp(pd, new QpInitAttributes(cq, cq, null, 4, SLOTS, 2, 1, 0, false));
        mr = pd.registerMemory(memory, IbvAccessFlags.LOCAL_WRITE);
        try (RecvWorkRequests recvs = new RecvWorkRequests(SLOTS, 1)) {
            for (int i = 0; i < SLOTS; i++) {
                recvs.set(i, -1 - i, mr, RECV_BASE + (long) i * SLOT, SLOT);
            }
            qp.postRecv(recvs, 0, SLOTS);
        }
        byte[] params = new byte[ConnectParameters.LENGTH];
        new ConnectParameters().wrap(MemorySegment.ofArray(params)).writeHeader().recvCredits(credits)
                .recvBufferSize(SLOT);
        id.connect(ConnParam.of(params));
        expect(CmEventType.ESTABLISHED).ack();
    }

    /** The local bytes writes are posted from. */
    MemorySegment payload() {
        return memory.asSlice(0, PAYLOAD);
    }

    /** Says a large write is waiting (a one-byte DATA with WANTS_RING) and waits for the server's RING. */
    RawPeer awaitRing() {
        header.wrap(memory, 0).write(MessageHeader.TYPE_DATA, MessageHeader.FLAG_WANTS_RING, 0, 0);
        memory.set(ValueLayout.JAVA_BYTE, MessageHeader.LENGTH, (byte) 1);
        sends.set(0, nextWrId++, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED).sge(0, 0, mr, 0, MessageHeader.LENGTH + 1)
                .numSge(0, 1);
        qp.postSend(sends, 0, 1);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (ringSize == 0) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the server offered no ring");
            }
            if (cq.poll(wcs, 1) == 1 && wcs.wrId(0) < 0) {
                assertThat(IbvWcStatus.name(wcs.status(0))).isEqualTo("SUCCESS");
                header.wrap(memory, RECV_BASE + (-1 - wcs.wrId(0)) * SLOT);
                if (header.type() == MessageHeader.TYPE_RING) {
                    ringAddress = header.ringAddress();
                    ringSize = header.ringSize();
                    ringRkeys = new int[header.ringSlabs()];
                    for (int k = 0; k < ringRkeys.length; k++) {
                        ringRkeys[k] = header.ringRkey(k);
                    }
                    slabSize = ringRkeys.length == 0 ? 0 : ringSize / ringRkeys.length;
                }
            }
        }
        return this;
    }

    /**
     * Posts an RDMA WRITE of {@code length} payload bytes to {@code remoteAddress}, WITH IMMEDIATE if
     * {@code immediate} is not null, and returns its completion status (a name from {@link IbvWcStatus}).
     */
    String write(long remoteAddress, int rkey, int length, Integer immediate) {
        long wrId = nextWrId++;
        sends.set(0, wrId, immediate == null ? IbvWrOpcode.RDMA_WRITE : IbvWrOpcode.RDMA_WRITE_WITH_IMM,
                IbvSendFlags.SIGNALED).rdma(0, remoteAddress, rkey).sge(0, 0, mr, 0, length).numSge(0, 1);
        if (immediate != null) {
            sends.immData(0, immediate);
        }
        qp.postSend(sends, 0, 1);
        return completionOf(wrId);
    }

    /**
     * Posts a SEND of a message header of {@code type} (with the {@code immediate} after it for
     * {@link MessageHeader#TYPE_SEAL}), {@code SEND_WITH_INV} of {@code invalidateRkey} if that is not null, and
     * returns its completion status.
     */
    String send(byte type, int immediate, Integer invalidateRkey) {
        long at = PAYLOAD - 64;
        header.wrap(memory, at).write(type, 0, 0);
        int length = MessageHeader.LENGTH;
        if (type == MessageHeader.TYPE_SEAL) {
            header.writeSeal(immediate);
            length += MessageHeader.SEAL_PAYLOAD;
        }
        long wrId = nextWrId++;
        sends.set(0, wrId, invalidateRkey == null ? IbvWrOpcode.SEND : IbvWrOpcode.SEND_WITH_INV,
                IbvSendFlags.SIGNALED).sge(0, 0, mr, at, length).numSge(0, 1);
        if (invalidateRkey != null) {
            sends.invalidateRkey(0, invalidateRkey);
        }
        qp.postSend(sends, 0, 1);
        return completionOf(wrId);
    }

    /** The status of work request {@code wrId}'s completion, within 20 s. */
    private String completionOf(long wrId) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (cq.poll(wcs, 1) == 1 && wcs.wrId(0) == wrId) {
                return IbvWcStatus.name(wcs.status(0));
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no completion for work request " + wrId);
    }

    /** A sealed ring write at the start of the ring's first slab, as the protocol has the first one land. */
    String ringWriteAtStart(int length) {
        return write(ringAddress, ringRkeys[0], length, Immediate.encode(length, 0, true, true));
    }

    private CmEvent expect(int type) {
        // Never a blocking wait: a connection the server refuses must fail the test, not hang it.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        CmEvent event;
        while ((event = channel.pollEvent()) == null) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no rdma_cm event within 20 s (expected " + CmEventType.name(type) + ")");
            }
            Thread.onSpinWait();
        }
        if (event.type() != type) {
            String got = CmEventType.name(event.type());
            event.ack();
            throw new AssertionError("expected " + CmEventType.name(type) + ", got " + got);
        }
        return event;
    }

    /** Moves the queue pair to ERR without telling the server: its sends to this peer go unacknowledged. */
    void stopAnswering() {
        qp.modifyToError();
    }

    /** {@code rdma_disconnect}: the server gets DISCONNECTED. */
    void disconnect() {
        id.disconnect();
    }

    @Override
    public void close() {
        if (qp != null) {
            qp.close();
        }
        if (mr != null) {
            mr.close();
        }
        if (cq != null) {
            cq.close();
        }
        if (pd != null) {
            pd.close();
        }
        id.close();
        sends.close();
        wcs.close();
        channel.close();
        arena.close();
    }
}
