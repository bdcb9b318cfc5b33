package io.netty.contrib.rdma.reactor;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Keeps {@link ReactorNettyBenchmark} working: three WebSocket bursts and three pipelined rounds over RDMA, every
 * echo and response received with the right byte count. No timing is asserted; the benchmark itself is run by
 * {@code benchmark.sh}.
 */
@Timeout(60)
class ReactorNettyBenchmarkSmokeTest {
    @Test
    void webSocketBurstsOverRdma() throws Exception {
        ReactorNettyBenchmark.Rounds rounds = ReactorNettyBenchmark.webSocketBurst(
                ReactorNettyBenchmark.Transport.RDMA, 0, 0, 3);
        assertThat(rounds.nanos()).hasSize(3);
        assertThat(rounds.bytes()).isEqualTo(3 * ReactorNettyBenchmark.burstBytes());
    }

    /**
     * With reads re-armed ({@link ReactorNettyBenchmark.RearmReads}): without, reactor-netty 1.3.7's server can stop
     * reading pipelined requests over RDMA (reactor-netty issue 4361; the benchmark reports it as STALLED).
     */
    @Test
    void pipelinedRoundsOverRdma() throws Exception {
        ReactorNettyBenchmark.Rounds rounds = ReactorNettyBenchmark.pipelining(
                ReactorNettyBenchmark.Transport.RDMA, 0, 0, 3, true);
        assertThat(rounds.nanos()).hasSize(3);
        assertThat(rounds.bytes()).isEqualTo(3L * ReactorNettyBenchmark.PIPELINE * ReactorNettyBenchmark.BODY);
    }
}
