package io.netty.contrib.channel.rdma.microbench.harness;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The raw-verbs floor that the in-process echo rows are divided by is the floor program's whole round trip, not the
 * half round trip it prints first (the echo rows are whole round trips).
 */
class InProcessEchoFloorTest {
    @Test
    void floorIsTheWholeRoundTrip() {
        // the lines native/tests/floor.c prints, two threads and one thread
        assertThat(InProcessEcho.roundTripMicros("pingpong 64 B in-process (send): half round trip p50 1.70 us"
                + "  p99 9.28 us  (round trip p50 3.39 us)\n")).isEqualTo(3.39);
        assertThat(InProcessEcho.roundTripMicros("pingpong 65536 B in-process, one thread (write with immediate):"
                + " half round trip p50 1.34 us  p99 2.01 us  (round trip p50 2.68 us)\n")).isEqualTo(2.68);
    }

    @Test
    void outputWithoutTheRoundTripIsAnError() {
        assertThatThrownBy(() -> InProcessEcho.roundTripMicros("pingpong 64 B in-process (send): half round trip p50"
                + " 1.70 us  p99 9.28 us\n")).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("round trip p50");
    }
}
