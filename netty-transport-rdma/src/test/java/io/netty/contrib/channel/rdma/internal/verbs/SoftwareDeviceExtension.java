package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.util.LinkedHashMap;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Runs a test class on the software RDMA device (failing if it is not built), or on the device a library path
 * chose, and on the software device checks after each test, once the test's own {@code @AfterEach} cleanup ran,
 * that the device holds no more objects of any kind than before the test: what the test created, it destroyed.
 * Other devices have no object counters: the check is then skipped, and each test's report says so.
 */
final class SoftwareDeviceExtension implements BeforeAllCallback, BeforeEachCallback, AfterEachCallback {
    private static final ExtensionContext.Namespace NAMESPACE =
            ExtensionContext.Namespace.create(SoftwareDeviceExtension.class);

    @Override
    public void beforeAll(ExtensionContext context) {
        SoftwareDevice.use();
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        if (SoftwareDevice.hasObjectCounts()) {
            context.getStore(NAMESPACE).put("baseline", SoftwareDevice.objectCounts());
        }
    }

    @Override
    @SuppressWarnings("unchecked")
    public void afterEach(ExtensionContext context) {
        Map<String, Long> baseline = context.getStore(NAMESPACE).get("baseline", Map.class);
        if (baseline == null) {
            context.publishReportEntry("leak check skipped", SoftwareDevice.NO_OBJECT_COUNTS);
            return;
        }
        Map<String, Long> grown = new LinkedHashMap<>();
        SoftwareDevice.objectCounts().forEach((kind, count) -> {
            if (!count.equals(baseline.get(kind))) {
                grown.put(kind, count - baseline.get(kind));
            }
        });
        assertThat(grown).as("software device objects the test left behind (kind -> count)").isEmpty();
    }
}
