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
        String text = Result.toJson(List.of(
                new Result("rdma", "adaptive", 64, 1, "rtt_p50", 12.5, "us"),
                new Result("rdma", "adaptive", 0, 1, "idle_cpu_loop_server", 0.0125, "% of a \"core\""),
                new Result("epoll", "tcp", 1 << 20, 8, "throughput_msgs", 123456789, "msg/s")));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> rows = (List<Map<String, Object>>) Json.parse(text);
        assertThat(rows).hasSize(3);
        assertThat(rows.get(0)).containsEntry("size", 64.0).containsEntry("value", 12.5);
        assertThat(rows.get(1)).doesNotContainKey("size").containsEntry("unit", "% of a \"core\"");
        assertThat((Double) rows.get(2).get("value"))
                .isCloseTo(123456789, within(1000.0));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "[1,]", "{a: 1}", "[NaN]", "[1] 2", "{\"a\": 1, \"a\": 2}", "[\"x]", "[01]",
            "[1.]", "{\"a\" 1}"})
    void refusesMalformed(String text) {
        assertThatThrownBy(() -> Json.parse(text)).isInstanceOf(IllegalArgumentException.class);
    }
}
