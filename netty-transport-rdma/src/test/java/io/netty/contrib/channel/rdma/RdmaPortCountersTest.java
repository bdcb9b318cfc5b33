package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The port counters of the devices rdma_cm reports move with traffic: an echo of 200 messages adds at least that
 * many packets sent and received (both ends on the device), SENDs completed and received, and no RNR (credits).
 * On the software device the names are kernel rxe's {@code hw_counters}; on kernel rxe they are its sysfs files.
 */
@Timeout(120)
class RdmaPortCountersTest {
    private static final int MESSAGES = 200;

    @Test
    void countersFollowTraffic() throws Exception {
        List<RdmaPortCounters> ports = RdmaPortCounters.list();
        assertThat(ports).isNotEmpty();
        RdmaPortCounters port = ports.getFirst();
        assertThat(port.names()).contains("hw_counters/sent_pkts", "hw_counters/rcvd_pkts",
                "hw_counters/rcvd_rnr_err", "hw_counters/send_rnr_err", "hw_counters/retry_exceeded_err",
                "hw_counters/completer_retry_err");
        if (NativeLibraries.isSoftwareDevice()) {
            assertThat(port.device()).isEqualTo("softrdma0");
            assertThat(port.names()).allMatch(n -> n.startsWith("hw_counters/"));
        }
        Map<String, Long> before = port.values();
        try (EchoLoops echo = new EchoLoops(new RdmaIoHandlerConfig(), 64)) {
            echo.pingPong.run(MESSAGES);
        }
        if (!NativeLibraries.isSoftwareDevice()) {
            // A kernel device refreshes what sysfs shows at most once per hw_counters/lifespan (10 ms by default).
            Thread.sleep(100);
        }
        Map<String, Long> after = port.values();
        assertThat(delta(before, after, "hw_counters/sent_pkts")).isGreaterThanOrEqualTo(2 * MESSAGES);
        assertThat(delta(before, after, "hw_counters/rcvd_pkts")).isGreaterThanOrEqualTo(2 * MESSAGES);
        assertThat(delta(before, after, "hw_counters/rdma_sends")).isGreaterThanOrEqualTo(MESSAGES);
        assertThat(delta(before, after, "hw_counters/rdma_recvs")).isGreaterThanOrEqualTo(2 * MESSAGES);
        assertThat(delta(before, after, "hw_counters/send_rnr_err")).as("credits: never RNR").isZero();
        assertThat(port.value("hw_counters/no_such_counter")).isEqualTo(-1);
    }

    private static long delta(Map<String, Long> before, Map<String, Long> after, String name) {
        return after.get(name) - before.get(name);
    }
}
