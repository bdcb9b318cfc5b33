package io.netty.contrib.channel.rdma;

import io.netty.buffer.ByteBuf;
import io.netty.channel.DefaultEventLoop;
import io.netty.contrib.channel.rdma.internal.protocol.Immediate;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.util.concurrent.Callable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The receive rings a connection offers, decision by decision, on real registered memory: offered when asked
 * for, withdrawn when idle, replaced when held buffers pin half of one, and each freed exactly when nothing can
 * write or read it any more.
 */
class OfferedRingsTest {
    private static final int RING = 64 * 1024;
    private static final int QUARTER = RING / 4;

    private static DefaultEventLoop loop;
    private static RdmaDevices.Device device;

    @BeforeAll
    static void device() {
        SoftwareRdma.use();
        RdmaDevices.retain();
        device = RdmaDevices.of(VerbsContext.cmDevices().get(0));
        loop = new DefaultEventLoop();
    }

    @AfterAll
    static void close() throws Exception {
        loop.shutdownGracefully(0, 0, java.util.concurrent.TimeUnit.SECONDS).sync();
        RdmaDevices.release();
    }

    private OfferedRings rings;

    private OfferedRings newRings() {
        // Plain regions (PD-wide rkeys): a window would need a queue pair to bind it on.
        rings = new OfferedRings(device.pd(), RING, true, 16, device.allocator(), loop,
                (r, seq) -> rings.bufferReleased(r, seq));
        return rings;
    }

    private static <T> T onLoop(Callable<T> task) throws Exception {
        return loop.submit(task).get();
    }

    private static long regions() {
        return SoftwareRdma.hasObjectCounts() ? SoftwareRdma.objectCounts().get("mr") : 0;
    }

    /** A write of {@code length} bytes of generation {@code gen} landing in {@code r}: its sequence number. */
    private static long arrive(ReceiveRing r, int length, boolean gen) {
        long seq = r.releases.arrive(Immediate.encode(length, false, gen));
        r.arrivals++;
        r.refs.incrementAndGet(); // as the connection does while the write waits to be read
        return seq;
    }

    @Test
    void aRingIsOfferedWhenAskedForAndWithdrawnWhenIdle() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            assertThat(rings.announceDue()).isFalse();
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isTrue();
            ReceiveRing first = rings.next();
            rings.announced(first);
            assertThat(rings.current()).isSameAs(first);
            assertThat(rings.announceDue()).isFalse();
            assertThat(first.generation).isTrue();
            assertThat(rings.ringOf(Immediate.encode(100, false, true))).isSameAs(first);
            assertThatThrownBy(() -> rings.ringOf(Immediate.encode(100, false, false)))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("after the switch");

            // Traffic keeps it; a look with no arrival since the last one withdraws it.
            rings.delivered(first, arrive(first, 1000, true));
            assertThat(rings.checkIdle()).isFalse();
            assertThat(rings.checkIdle()).isTrue();
            assertThat(rings.announceDue()).isTrue();
            assertThat(rings.next()).isNull();
            rings.announced(null);
            assertThat(rings.current()).isNull();
            // Until the peer confirms the RING, its writes may still land in the old ring, and nothing else is
            // announced (one generation bit).
            assertThat(rings.ringOf(Immediate.encode(100, false, true))).isSameAs(first);
            rings.peerWantsRing();
            assertThat(rings.announceDue()).isFalse();
            rings.peerLeftRetired();
            assertThat(first.refs.get()).isZero();
            assertThatThrownBy(() -> rings.ringOf(Immediate.encode(100, false, true)))
                    .isInstanceOf(ProtocolException.class).hasMessageContaining("offers no ring");
            assertThat(rings.announceDue()).isTrue();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void heldBuffersPinningHalfTheRingBringANewOneAndTheOldLivesUntilTheyAreReleased() throws Exception {
        long before = regions();
        ByteBuf[] held = onLoop(() -> {
            OfferedRings rings = newRings();
            rings.peerWantsRing();
            ReceiveRing first = rings.next();
            rings.announced(first);
            ByteBuf[] bufs = new ByteBuf[2];
            for (int i = 0; i < 2; i++) {
                long seq = arrive(first, QUARTER, true);
                assertThat(rings.mayHold(first, seq)).isTrue();
                bufs[i] = first.heldBuffer(device.allocator(), first.memory.address() + first.releases.lastOffset(),
                        QUARTER, seq);
                rings.unref(first); // the queued write's reference: it was handed over
            }
            assertThat(rings.announceDue()).isTrue();
            ReceiveRing second = rings.next();
            rings.announced(second);
            assertThat(second.generation).isFalse();
            // While a retired ring lives, nothing new is handed over as a buffer: the peer must not be able to
            // pin both rings.
            long seq = arrive(second, 100, false);
            assertThat(rings.mayHold(second, seq)).isFalse();
            rings.delivered(second, seq);
            rings.peerLeftRetired();
            assertThat(first.refs.get()).isEqualTo(2);
            return bufs;
        });
        held[0].release();
        held[1].release();
        onLoop(() -> {
            ReceiveRing second = rings.current();
            long seq = arrive(second, 100, false);
            assertThat(rings.mayHold(second, seq)).isTrue();
            rings.delivered(second, seq);
            rings.release();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }

    @Test
    void freedSpaceIsDueAsCreditWhenThePeerMayBeShortOfRoom() throws Exception {
        long before = regions();
        onLoop(() -> {
            OfferedRings rings = newRings();
            assertThat(rings.creditsDue()).isFalse();
            assertThat(rings.takeOwed()).isZero();
            rings.peerWantsRing();
            ReceiveRing ring = rings.next();
            rings.announced(ring);
            long a = arrive(ring, QUARTER, true);
            long b = arrive(ring, QUARTER, true);
            long c = arrive(ring, QUARTER, true);
            assertThat(rings.creditsDue()).isFalse();
            // Out of order: nothing can be returned before the first write is released.
            rings.delivered(ring, b);
            assertThat(rings.creditsDue()).isFalse();
            rings.delivered(ring, a);
            // Half the ring freed: the writer, as far as it knows, has a quarter left.
            assertThat(rings.creditsDue()).isTrue();
            assertThat(rings.takeOwed()).isEqualTo(2 * QUARTER);
            assertThat(rings.creditsDue()).isFalse();
            rings.delivered(ring, c);
            rings.release();
            return null;
        });
        assertThat(regions()).isEqualTo(before);
    }
}
