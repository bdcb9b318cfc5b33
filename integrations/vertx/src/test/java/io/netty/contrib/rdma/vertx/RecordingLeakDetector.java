package io.netty.contrib.rdma.vertx;

import io.netty.util.ResourceLeakDetector;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/** A leak detector that also records what it reports; installed with {@code -Dio.netty.customResourceLeakDetector}. */
public final class RecordingLeakDetector<T> extends ResourceLeakDetector<T> {
    static final List<String> LEAKS = new CopyOnWriteArrayList<>();

    public RecordingLeakDetector(Class<?> resourceType, int samplingInterval) {
        super(resourceType, samplingInterval);
    }

    @Override
    protected void reportTracedLeak(String resourceType, String records) {
        LEAKS.add(resourceType + records);
        super.reportTracedLeak(resourceType, records);
    }

    @Override
    protected void reportUntracedLeak(String resourceType) {
        LEAKS.add(resourceType);
        super.reportUntracedLeak(resourceType);
    }
}
