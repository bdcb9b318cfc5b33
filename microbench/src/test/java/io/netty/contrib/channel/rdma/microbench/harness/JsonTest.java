package io.netty.contrib.channel.rdma.microbench.harness;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

/** The test's JSON reader accepts what {@link Result#toJson(List)} writes and refuses what is not JSON. */
class JsonTest {
    @Test
    void readsWhatResultsWrite() {
        String text = Result.toJson(List.of(List.of(
                new Result("rdma", "adaptive", 64, 1, "rtt_p50", 12.5, "us"),
                new Result("rdma", "adaptive", 0, 1, "idle_cpu_loop_server", 0.0125, "% of a \"core\""),
                new Result("epoll", "tcp", 1 << 20, 8, "throughput_msgs", 123456789, "msg/s"))));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> rows = (List<Map<String, Object>>) Json.parse(text);
        assertThat(rows).hasSize(3);
        assertThat(rows.get(0)).containsEntry("size", 64.0).containsEntry("value", 12.5);
        assertThat(rows.get(1)).doesNotContainKey("size").containsEntry("unit", "% of a \"core\"");
        assertThat((Double) rows.get(2).get("value"))
                .isCloseTo(123456789, within(1000.0));
        assertThat(rows.get(0)).doesNotContainKey("repeat");
    }

    @Test
    void repeatsNameTheirRepeat() {
        String text = Result.toJson(List.of(
                List.of(new Result("rdma", "adaptive", 64, 1, "rtt_p50", 3, "us")),
                List.of(new Result("rdma", "adaptive", 64, 1, "rtt_p50", 4, "us"))));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> rows = (List<Map<String, Object>>) Json.parse(text);
        assertThat(rows).hasSize(2);
        assertThat(rows.get(0)).containsEntry("repeat", 1.0).containsEntry("value", 3.0);
        assertThat(rows.get(1)).containsEntry("repeat", 2.0).containsEntry("value", 4.0);
    }

    /** Values are medians over the repeats; a ratio is the median of the ratios within each repeat. */
    @Test
    void repeatedRunsGiveMediansOfRatios() {
        Results r = Results.ofRepeats(List.of(
                List.of(rtt("rdma", "adaptive", 2), rtt("verbs", "ib_send_lat", 1)),
                List.of(rtt("rdma", "adaptive", 9), rtt("verbs", "ib_send_lat", 6)),
                List.of(rtt("rdma", "adaptive", 4), rtt("verbs", "ib_send_lat", 4))));
        assertThat(r.get(Results.RDMA_ADAPTIVE, 64, 1, "rtt_p50")).isEqualTo(4.0);
        assertThat(r.get(Results.VERBS_SEND_LAT, 64, 1, "rtt_p50")).isEqualTo(4.0);
        // Within each repeat: 2.0, 1.5, 1.0; the ratio of the medians would be 1.0.
        assertThat(r.median(x -> Results.ratio(x.get(Results.RDMA_ADAPTIVE, 64, 1, "rtt_p50"),
                x.get(Results.VERBS_SEND_LAT, 64, 1, "rtt_p50")))).isEqualTo(1.5);
        assertThat(r.get(Results.EPOLL, 64, 1, "rtt_p50")).isNull();
        assertThat(Results.median(List.of(1.0, 2.0, 10.0, 3.0))).isEqualTo(2.5);
        assertThat(Results.ofRepeats(List.of(List.of(rtt("rdma", "adaptive", 2)))).repeatCount()).isEqualTo(1);
    }

    private static Result rtt(String transport, String mode, double value) {
        return new Result(transport, mode, 64, 1, "rtt_p50", value, "us");
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "[1,]", "{a: 1}", "[NaN]", "[1] 2", "{\"a\": 1, \"a\": 2}", "[\"x]", "[01]",
            "[1.]", "{\"a\" 1}"})
    void refusesMalformed(String text) {
        assertThatThrownBy(() -> Json.parse(text)).isInstanceOf(IllegalArgumentException.class);
    }
}
