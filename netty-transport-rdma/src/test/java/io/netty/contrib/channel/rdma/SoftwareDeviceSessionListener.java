package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

/**
 * Runs the module's tests on the bundled software RDMA device unless the build chose the libraries itself
 * ({@value NativeLibraries#LIBRARY_PATH_PROPERTY} or {@value NativeLibraries#LIBRARY_PATH_ENV}). The choice is
 * made once per JVM, so it has to happen before the first test class touches the bindings: at session start.
 */
public final class SoftwareDeviceSessionListener implements LauncherSessionListener {

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        if (System.getProperty(NativeLibraries.LIBRARY_PATH_PROPERTY) == null
                && System.getenv(NativeLibraries.LIBRARY_PATH_ENV) == null) {
            System.setProperty(NativeLibraries.LIBRARY_PATH_PROPERTY, NativeLibraries.BUNDLED);
        }
    }
}
