package io.netty.contrib.channel.rdma;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The queue of received, unread messages: order, partial reads, capacity. */
class ReceivedQueueTest {
    @Test
    void keepsArrivalOrderAcrossTheWrapOfItsArrays() {
        ReceivedQueue q = new ReceivedQueue(3);
        int next = 0;
        int expected = 0;
        for (int round = 0; round < 10; round++) {
            while (q.size() < 3) {
                q.add(next, ReceivedQueue.DATA, 1000L * next, next + 1, -1, null);
                next++;
            }
            for (int i = 0; i < 2; i++) {
                assertThat(q.slot()).isEqualTo(expected);
                assertThat(q.address()).isEqualTo(1000L * expected);
                assertThat(q.length()).isEqualTo(expected + 1);
                assertThat(q.kind()).isEqualTo(ReceivedQueue.DATA);
                q.remove();
                expected++;
            }
        }
        assertThat(q.size()).isEqualTo(1);
        assertThat(q.slot()).isEqualTo(expected);
    }

    @Test
    void aPartlyTakenMessageStaysAtTheHeadWithItsRest() {
        ReceivedQueue q = new ReceivedQueue(2);
        q.add(7, ReceivedQueue.DATA, 100, 50, -1, null);
        q.add(8, ReceivedQueue.SHUTDOWN, 0, 0, -1, null);
        q.taken(20);
        assertThat(q.slot()).isEqualTo(7);
        assertThat(q.address()).isEqualTo(120);
        assertThat(q.length()).isEqualTo(30);
        assertThat(q.kind()).isEqualTo(ReceivedQueue.DATA);
        q.taken(30);
        assertThat(q.length()).isZero();
        q.remove();
        assertThat(q.kind()).isEqualTo(ReceivedQueue.SHUTDOWN);
        assertThatThrownBy(() -> q.taken(1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void aRingWriteCopiedInPartsIsNoLongerOneWholeWrite() {
        ReceivedQueue q = new ReceivedQueue(1);
        q.add(1, ReceivedQueue.RING, 4096, 100_000, 5, null);
        assertThat(q.ringSeq()).isEqualTo(5);
        q.taken(65_536);
        // The reader has the first part as a copy: the rest can no longer be handed over as one buffer.
        assertThat(q.kind()).isEqualTo(ReceivedQueue.RING_COPY);
        assertThat(q.length()).isEqualTo(100_000 - 65_536);
        assertThat(q.ringSeq()).isEqualTo(5);
    }

    @Test
    void growsToItsCapacityKeepingTheOrderOfWhatWaits() {
        ReceivedQueue q = new ReceivedQueue(64);
        // Wrapped around the first arrays before they grow.
        for (int i = 0; i < 5; i++) {
            q.add(-1, ReceivedQueue.DATA, 0, 1, -1, null);
        }
        for (int i = 0; i < 5; i++) {
            q.remove();
        }
        for (int i = 0; i < 64; i++) {
            q.add(i, ReceivedQueue.DATA, i, i + 1, -1, null);
        }
        assertThatThrownBy(() -> q.add(64, ReceivedQueue.DATA, 0, 1, -1, null))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("more than 64");
        for (int i = 0; i < 64; i++) {
            assertThat(q.slot()).isEqualTo(i);
            assertThat(q.address()).isEqualTo(i);
            assertThat(q.length()).isEqualTo(i + 1);
            q.remove();
        }
        assertThat(q.isEmpty()).isTrue();
    }

    @Test
    void refusesMoreMessagesThanCredits() {
        ReceivedQueue q = new ReceivedQueue(2);
        q.add(0, ReceivedQueue.DATA, 0, 1, -1, null);
        q.add(1, ReceivedQueue.DATA, 0, 1, -1, null);
        assertThatThrownBy(() -> q.add(2, ReceivedQueue.DATA, 0, 1, -1, null))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("more than 2");
        assertThat(q.size()).isEqualTo(2);
        assertThat(q.slot()).isZero();
    }
}
