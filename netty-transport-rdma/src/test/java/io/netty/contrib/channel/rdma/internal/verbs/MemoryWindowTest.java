package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

/**
 * Type 2 memory windows as the transport scopes a connection's receive ring with them: on one context, QPs A and C
 * share the ring's PD (the ring registered {@code LOCAL_WRITE | MW_BIND}, no remote access of its own) and are
 * connected by hand to peers B and D (another PD). A window bound on A opens part of the ring to B alone, until it
 * is invalidated or deallocated.
 */
@ExtendWith(SoftwareDeviceExtension.class)
class MemoryWindowTest {
    private static final int PORT = 1;
    private static final int RING_SIZE = 64 * 1024;
    private static final long WINDOW_OFFSET = 16 * 1024;
    private static final long WINDOW_LENGTH = 32 * 1024;
    private static final int TIMEOUT_MILLIS = 10_000;

    private final Arena arena = Arena.ofShared();
    private VerbsContext context;
    private ProtectionDomain pd;
    private ProtectionDomain peerPd;
    private Side a;
    private Side b;
    private Side c;
    private Side d;
    private MemorySegment ring;
    private MemoryRegion ringMr;
    private MemorySegment source;
    private MemoryRegion sourceMr;
    private final List<MemoryWindow> windows = new ArrayList<>();

    /** One QP with its own CQ and work request arrays. */
    private final class Side {
        final CompletionQueue cq;
        final QueuePair qp;
        final SendWorkRequests sends = new SendWorkRequests(4, 1);
        final RecvWorkRequests recvs = new RecvWorkRequests(4, 1);
        final WorkCompletions wcs = new WorkCompletions(4);

        Side(ProtectionDomain pd) {
            cq = context.createCq(16, null, 0);
            qp = pd.createQp(new QpInitAttributes(cq, cq, null, 4, 4, 1, 1, 0, false));
        }

        /** Polls one completion into {@code wcs[0]} (fails after the timeout). */
        WorkCompletions pollOne() {
            long deadline = System.nanoTime() + TIMEOUT_MILLIS * 1_000_000L;
            while (cq.poll(wcs, 1) == 0) {
                if (System.nanoTime() > deadline) {
                    fail("no completion on QP 0x" + Integer.toHexString(qp.qpNum()) + " within " + TIMEOUT_MILLIS
                            + " ms");
                }
                Thread.onSpinWait();
            }
            return wcs;
        }

        Completion poll() {
            return Completion.of(pollOne(), 0);
        }

        void assertNoCompletion() {
            assertThat(cq.poll(wcs)).as("unexpected completions").isZero();
        }

        void close() {
            qp.close();
            cq.close();
            sends.close();
            recvs.close();
            wcs.close();
        }
    }

    @BeforeEach
    void open() {
        context = VerbsContext.openFirst();
        pd = context.allocPd();
        peerPd = context.allocPd();
        a = new Side(pd);
        c = new Side(pd);
        b = new Side(peerPd);
        d = new Side(peerPd);
        byte[] gid = context.queryGid(PORT, 0);
        int mtu = context.queryPort(PORT).activeMtu();
        connect(a.qp, b.qp.qpNum(), gid, mtu);
        connect(b.qp, a.qp.qpNum(), gid, mtu);
        connect(c.qp, d.qp.qpNum(), gid, mtu);
        connect(d.qp, c.qp.qpNum(), gid, mtu);
        ring = arena.allocate(RING_SIZE, 4096);
        ringMr = pd.registerMemory(ring, IbvAccessFlags.LOCAL_WRITE | IbvAccessFlags.MW_BIND);
        source = arena.allocate(4096, 4096);
        sourceMr = peerPd.registerMemory(source, IbvAccessFlags.LOCAL_WRITE);
    }

    @AfterEach
    void close() {
        windows.forEach(MemoryWindow::close);
        ringMr.close();
        sourceMr.close();
        for (Side side : new Side[] {a, b, c, d}) {
            side.close();
        }
        peerPd.close();
        pd.close();
        context.close();
        arena.close();
    }

    @Test
    void theDeviceOffersTypeTwoWindows() {
        DeviceAttributes device = context.queryDevice();
        assertThat(device.maxMw()).isPositive();
        assertThat(device.deviceCapFlags() & IbvDeviceCapFlags.MEM_WINDOW).isNotZero();
        assertThat(device.supportsType2Windows()).isTrue();
    }

    @Test
    void incRkeyIncrementsTheLowEightBitsOnly() {
        assertThat(MemoryWindow.incRkey(0x12345678)).isEqualTo(0x12345679);
        assertThat(MemoryWindow.incRkey(0x123456FF)).isEqualTo(0x12345600);
        assertThat(MemoryWindow.incRkey(0xFFFFFFFF)).isEqualTo(0xFFFFFF00);
        assertThat(MemoryWindow.incRkey(0)).isEqualTo(1);
    }

    @Test
    void aWindowBoundOnAQpGrantsItsPeerWritesThatLand() {
        MemoryWindow mw = window();
        assertThat(mw.type()).isEqualTo(IbvMwType.TYPE_2);
        assertThat(mw.pd()).isSameAs(pd);
        int allocated = mw.rkey();
        int rkey = mw.nextRkey();
        assertThat(rkey).isNotEqualTo(allocated).isEqualTo(MemoryWindow.incRkey(allocated));

        a.sends.set(0, 1, IbvWrOpcode.BIND_MW, IbvSendFlags.SIGNALED)
                .bindMw(0, mw, rkey, ringMr, WINDOW_OFFSET, WINDOW_LENGTH, IbvAccessFlags.REMOTE_WRITE);
        a.qp.postSend(a.sends, 0, 1);
        mw.updateRkey(rkey);
        assertThat(mw.rkey()).isEqualTo(rkey);
        Completion bound = a.poll();
        assertThat(IbvWcStatus.name(bound.status())).isEqualTo("SUCCESS");
        assertThat(IbvWcOpcode.name(bound.opcode())).isEqualTo("BIND_MW");
        assertThat(bound.wrId()).isEqualTo(1);
        assertThat(bound.qpNum()).isEqualTo(a.qp.qpNum());

        byte[] payload = fill(0, "through the window");
        long target = ringMr.addr() + WINDOW_OFFSET + 100;
        assertThat(write(b, target, mw.rkey(), payload.length)).isEqualTo("SUCCESS");
        assertThat(ring.asSlice(WINDOW_OFFSET + 100, payload.length).toArray(JAVA_BYTE)).isEqualTo(payload);
        // the last byte of the window is writable, the next one is not
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET + WINDOW_LENGTH - 1, mw.rkey(), 1)).isEqualTo("SUCCESS");
        a.assertNoCompletion();
    }

    @Test
    void aWriteBeyondTheWindowIsRefused() {
        MemoryWindow mw = bound(a);
        fill(0, "x".repeat(64));
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET + WINDOW_LENGTH - 32, mw.rkey(), 64))
                .isEqualTo("REM_ACCESS_ERR");
        assertRingUntouched();
    }

    @Test
    void theWindowsRkeyIsRefusedOnAnotherQpOfThePd() {
        MemoryWindow mw = bound(a);
        fill(0, "must not land through C");
        assertThat(write(d, ringMr.addr() + WINDOW_OFFSET, mw.rkey(), 23)).isEqualTo("REM_ACCESS_ERR");
        assertThat(IbvQpState.name(d.qp.queryState())).isEqualTo("ERR");
        assertRingUntouched();
        // the window still serves the QP it is bound to
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET, mw.rkey(), 23)).isEqualTo("SUCCESS");
    }

    @Test
    void theRegionsOwnRkeyGrantsNothingRemotely() {
        bound(a);
        fill(0, "not through the MR's rkey");
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET, ringMr.rkey(), 25)).isEqualTo("REM_ACCESS_ERR");
        assertRingUntouched();
    }

    @Test
    void localInvalidateEndsTheWindowAndANewBindGivesANewRkey() {
        MemoryWindow mw = bound(a);
        int first = mw.rkey();
        byte[] payload = fill(0, "before the invalidation");
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET, first, payload.length)).isEqualTo("SUCCESS");

        a.sends.set(0, 2, IbvWrOpcode.LOCAL_INV, IbvSendFlags.SIGNALED).invalidateRkey(0, first);
        a.qp.postSend(a.sends, 0, 1);
        Completion invalidated = a.poll();
        assertThat(IbvWcStatus.name(invalidated.status())).isEqualTo("SUCCESS");
        assertThat(IbvWcOpcode.name(invalidated.opcode())).isEqualTo("LOCAL_INV");

        int second = bind(a, mw, 3, IbvSendFlags.SIGNALED);
        assertThat(a.poll().opcode()).isEqualTo(IbvWcOpcode.BIND_MW);
        assertThat(second).isNotEqualTo(first);
        assertThat(second & ~0xFF).isEqualTo(first & ~0xFF);
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET + 1000, second, payload.length)).isEqualTo("SUCCESS");

        fill(0, "after the invalidation!");
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET, first, payload.length)).isEqualTo("REM_ACCESS_ERR");
        assertThat(ring.asSlice(WINDOW_OFFSET, payload.length).toArray(JAVA_BYTE)).isEqualTo(payload);
    }

    @Test
    void aPeersSendWithInvalidateEndsTheWindow() {
        MemoryWindow mw = bound(a);
        a.recvs.set(0, 40, ringMr, 0, 64);
        a.qp.postRecv(a.recvs, 0, 1);
        byte[] message = fill(0, "done with your ring");
        b.sends.set(0, 5, IbvWrOpcode.SEND_WITH_INV, IbvSendFlags.SIGNALED).invalidateRkey(0, mw.rkey())
                .sge(0, 0, sourceMr, 0, message.length);
        b.qp.postSend(b.sends, 0, 1);
        assertThat(IbvWcStatus.name(b.poll().status())).isEqualTo("SUCCESS");

        WorkCompletions received = a.pollOne();
        assertThat(IbvWcStatus.name(received.status(0))).as(received.toString(0)).isEqualTo("SUCCESS");
        assertThat(received.opcode(0)).isEqualTo(IbvWcOpcode.RECV);
        assertThat(received.hasInv(0)).isTrue();
        assertThat(received.hasImm(0)).isFalse();
        assertThat(received.invalidatedRkey(0)).isEqualTo(mw.rkey());
        assertThat(ring.asSlice(0, message.length).toArray(JAVA_BYTE)).isEqualTo(message);

        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET, mw.rkey(), 8)).isEqualTo("REM_ACCESS_ERR");
        assertRingUntouched();
    }

    @Test
    void aBindChainedBeforeTheSendThatAnnouncesTheRkeyIsInForceWhenThePeerUsesIt() {
        MemoryWindow mw = window();
        b.recvs.set(0, 50, sourceMr, 2048, 64);
        b.qp.postRecv(b.recvs, 0, 1);
        int rkey = mw.nextRkey();
        long windowAddr = ringMr.addr() + WINDOW_OFFSET;
        ring.set(JAVA_LONG, 0, windowAddr);
        ring.set(JAVA_INT, 8, rkey);
        a.sends.set(0, 6, IbvWrOpcode.BIND_MW, 0)
                .bindMw(0, mw, rkey, ringMr, WINDOW_OFFSET, WINDOW_LENGTH, IbvAccessFlags.REMOTE_WRITE);
        a.sends.set(1, 7, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED).sge(1, 0, ringMr, 0, 12);
        a.qp.postSend(a.sends, 0, 2);
        mw.updateRkey(rkey);

        Completion sent = a.poll();
        assertThat(sent.wrId()).as("only the signalled SEND completes").isEqualTo(7);
        assertThat(IbvWcStatus.name(sent.status())).isEqualTo("SUCCESS");
        assertThat(b.poll().wrId()).isEqualTo(50);
        long announcedAddr = source.get(JAVA_LONG, 2048);
        int announcedRkey = source.get(JAVA_INT, 2056);
        assertThat(announcedRkey).isEqualTo(mw.rkey());

        byte[] payload = fill(0, "written with the announced rkey");
        assertThat(write(b, announcedAddr, announcedRkey, payload.length)).isEqualTo("SUCCESS");
        assertThat(ring.asSlice(WINDOW_OFFSET, payload.length).toArray(JAVA_BYTE)).isEqualTo(payload);
        a.assertNoCompletion();
    }

    @Test
    void closingAWindowInvalidatesAndFreesIt() {
        Map<String, Long> before = SoftwareDevice.hasObjectCounts() ? SoftwareDevice.objectCounts() : null;
        MemoryWindow idle = pd.allocMw(IbvMwType.TYPE_2);
        MemoryWindow mw = bound(a);
        if (before != null) {
            assertThat(SoftwareDevice.objectCounts().get("mw")).isEqualTo(before.get("mw") + 2);
        }
        assertThatThrownBy(ringMr::close).as("deregistering a region with a window bound")
                .isInstanceOfSatisfying(VerbsException.class, e -> assertThat(e.errno()).isEqualTo(Errno.EINVAL))
                .hasMessageContaining("memory windows may still be bound");
        assertThat(ringMr.isOpen()).isTrue();

        int rkey = mw.rkey();
        mw.close();
        mw.close();
        idle.close();
        assertThat(mw.isOpen()).isFalse();
        if (before != null) {
            assertThat(SoftwareDevice.objectCounts()).isEqualTo(before);
        }
        fill(0, "after dealloc");
        assertThat(write(b, ringMr.addr() + WINDOW_OFFSET, rkey, 13)).isEqualTo("REM_ACCESS_ERR");
        assertRingUntouched();
    }

    @Test
    void bindingABoundWindowAgainFailsWithMwBindErrAndTheQpGoesToError() {
        MemoryWindow mw = bound(a);
        bind(a, mw, 11, IbvSendFlags.SIGNALED);
        Completion failed = a.poll();
        assertThat(IbvWcStatus.name(failed.status())).isEqualTo("MW_BIND_ERR");
        assertThat(failed.wrId()).isEqualTo(11);
        assertThat(IbvQpState.name(a.qp.queryState())).isEqualTo("ERR");
    }

    @Test
    void aBindWithoutAWindowIsRefusedWhenPosted() {
        a.sends.set(0, 8, IbvWrOpcode.BIND_MW, IbvSendFlags.SIGNALED);
        assertThatThrownBy(() -> a.qp.postSend(a.sends, 0, 1)).isInstanceOfSatisfying(VerbsException.class,
                e -> assertThat(e.errno()).isEqualTo(Errno.EINVAL));
        a.assertNoCompletion();
    }

    @Test
    void onAQpInErrorBindsAndInvalidationsFlushAndTheWindowIsClosedAsUsual() {
        MemoryWindow mw = window();
        a.qp.modifyToError();
        int rkey = bind(a, mw, 9, IbvSendFlags.SIGNALED);
        Completion flushed = a.poll();
        assertThat(IbvWcStatus.name(flushed.status())).isEqualTo("WR_FLUSH_ERR");
        assertThat(flushed.wrId()).isEqualTo(9);
        a.sends.set(0, 10, IbvWrOpcode.LOCAL_INV, IbvSendFlags.SIGNALED).invalidateRkey(0, rkey);
        a.qp.postSend(a.sends, 0, 1);
        assertThat(IbvWcStatus.name(a.poll().status())).isEqualTo("WR_FLUSH_ERR");
        mw.close();
        assertThat(mw.isOpen()).isFalse();
    }

    /** A type 2 window, closed after the test. */
    private MemoryWindow window() {
        MemoryWindow mw = pd.allocMw(IbvMwType.TYPE_2);
        windows.add(mw);
        return mw;
    }

    /** A window bound on {@code side}'s QP over the ring's window range with remote write access. */
    private MemoryWindow bound(Side side) {
        MemoryWindow mw = window();
        bind(side, mw, 77, IbvSendFlags.SIGNALED);
        Completion bound = side.poll();
        assertThat(IbvWcStatus.name(bound.status())).isEqualTo("SUCCESS");
        assertThat(bound.opcode()).isEqualTo(IbvWcOpcode.BIND_MW);
        return mw;
    }

    /** Posts a bind of {@code mw} with its next rkey and records that rkey, as a consumer of type 2 must. */
    private int bind(Side side, MemoryWindow mw, long wrId, int flags) {
        int rkey = mw.nextRkey();
        side.sends.set(0, wrId, IbvWrOpcode.BIND_MW, flags)
                .bindMw(0, mw, rkey, ringMr, WINDOW_OFFSET, WINDOW_LENGTH, IbvAccessFlags.REMOTE_WRITE);
        side.qp.postSend(side.sends, 0, 1);
        mw.updateRkey(rkey);
        return rkey;
    }

    /** An RDMA WRITE of the first {@code length} source bytes from {@code side}; returns the completion status. */
    private String write(Side side, long remoteAddr, int rkey, int length) {
        side.sends.set(0, 1000, IbvWrOpcode.RDMA_WRITE, IbvSendFlags.SIGNALED).rdma(0, remoteAddr, rkey)
                .sge(0, 0, sourceMr, 0, length);
        side.qp.postSend(side.sends, 0, 1);
        Completion written = side.poll();
        assertThat(written.wrId()).isEqualTo(1000);
        return IbvWcStatus.name(written.status());
    }

    private byte[] fill(long offset, String text) {
        byte[] bytes = text.getBytes(StandardCharsets.US_ASCII);
        MemorySegment.copy(bytes, 0, source, JAVA_BYTE, offset, bytes.length);
        return bytes;
    }

    private void assertRingUntouched() {
        assertThat(ring.asSlice(WINDOW_OFFSET, WINDOW_LENGTH).toArray(JAVA_BYTE)).as("no byte of the window changed")
                .isEqualTo(new byte[(int) WINDOW_LENGTH]);
    }

    private static void connect(QueuePair qp, int remoteQpNum, byte[] gid, int mtu) {
        qp.modifyToInit(PORT, IbvAccessFlags.REMOTE_WRITE | IbvAccessFlags.REMOTE_READ);
        qp.modifyToRtr(new RtrAttributes(mtu, remoteQpNum, 0, 1, 12, PORT, 0, gid, 0));
        qp.modifyToRts(0, 14, 7, 7, 1);
    }
}
