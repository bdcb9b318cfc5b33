package io.netty.contrib.channel.rdma.internal.verbs;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import java.util.Optional;

/**
 * Chooses and loads {@code libibverbs.so.1} and {@code librdmacm.so.1}, once per class loader.
 *
 * <ul>
 *   <li>Default: the system libraries by name ({@code dlopen} search, so {@code LD_LIBRARY_PATH} applies).</li>
 *   <li>{@value #LIBRARY_PATH_PROPERTY} (or {@value #LIBRARY_PATH_ENV}) = a directory: both libraries from there,
 *       libibverbs first so that librdmacm's {@code DT_NEEDED libibverbs.so.1} binds to the one already loaded.</li>
 *   <li>The value {@value #BUNDLED}: the software RDMA device shipped in the jar, extracted to a private temporary
 *       directory, deleted as soon as both are loaded (or on exit).</li>
 * </ul>
 * There is no fallback from one to another: a failure is kept and reported by {@link #loadFailure()}.
 */
public final class NativeLibraries {
    /** System property naming the directory to load the RDMA libraries from, or {@value #BUNDLED}. */
    public static final String LIBRARY_PATH_PROPERTY = "io.netty.contrib.rdma.libraryPath";
    /** Environment variable used when {@value #LIBRARY_PATH_PROPERTY} is not set. */
    public static final String LIBRARY_PATH_ENV = "NETTY_RDMA_LIBRARY_PATH";
    /** The value of {@value #LIBRARY_PATH_PROPERTY} that selects the bundled software RDMA device. */
    public static final String BUNDLED = "bundled";
    /** Where the software device's libraries live inside the jar. */
    public static final String BUNDLED_RESOURCE_DIR = "META-INF/native/softrdma/linux-x86_64/";

    static final String IBVERBS = "libibverbs.so.1";
    static final String RDMACM = "librdmacm.so.1";

    /** Where the libraries came from. */
    public enum Source { SYSTEM, DIRECTORY, BUNDLED }

    private static final SymbolLookup NOTHING = name -> Optional.empty();

    private static final Source SOURCE;
    private static final String DESCRIPTION;
    private static final SymbolLookup IBVERBS_LOOKUP;
    private static final SymbolLookup RDMACM_LOOKUP;
    private static final Throwable LOAD_FAILURE;

    static {
        String configured = System.getProperty(LIBRARY_PATH_PROPERTY);
        if (configured == null || configured.isBlank()) {
            configured = System.getenv(LIBRARY_PATH_ENV);
        }
        Source source;
        String description;
        SymbolLookup ibverbs = NOTHING;
        SymbolLookup rdmacm = NOTHING;
        Throwable failure = null;
        if (configured == null || configured.isBlank()) {
            source = Source.SYSTEM;
            description = "the system's " + IBVERBS + " and " + RDMACM;
            try {
                ibverbs = SymbolLookup.libraryLookup(IBVERBS, Arena.global());
                rdmacm = SymbolLookup.libraryLookup(RDMACM, Arena.global());
            } catch (RuntimeException e) {
                failure = new UnsupportedOperationException(notInstalledMessage(e.getMessage()), e);
            }
        } else {
            Path directory;
            if (BUNDLED.equals(configured.trim())) {
                source = Source.BUNDLED;
                directory = null;
                try {
                    directory = extractBundled();
                } catch (IOException | RuntimeException e) {
                    failure = new UnsupportedOperationException(e.getMessage(), e);
                }
                description = "the bundled software RDMA device"
                        + (directory == null ? "" : " (extracted to " + directory + ", deleted once loaded)");
            } else {
                source = Source.DIRECTORY;
                directory = Path.of(configured.trim()).toAbsolutePath();
                description = IBVERBS + " and " + RDMACM + " from " + directory;
            }
            if (directory != null) {
                try {
                    ibverbs = loadFrom(directory, IBVERBS);
                    rdmacm = loadFrom(directory, RDMACM);
                    if (source == Source.BUNDLED) {
                        // Loaded and mapped: the files are no longer needed, and a JVM that is killed (not
                        // exited) would otherwise leave them behind, deleteOnExit notwithstanding.
                        deleteExtracted(directory);
                    }
                } catch (RuntimeException e) {
                    ibverbs = NOTHING;
                    rdmacm = NOTHING;
                    failure = new UnsupportedOperationException("cannot load the RDMA libraries from " + directory
                            + " (set by -D" + LIBRARY_PATH_PROPERTY + " or " + LIBRARY_PATH_ENV + "): "
                            + e.getMessage(), e);
                }
            }
        }
        SOURCE = source;
        DESCRIPTION = description;
        IBVERBS_LOOKUP = ibverbs;
        RDMACM_LOOKUP = rdmacm;
        LOAD_FAILURE = failure;
    }

    private NativeLibraries() {
    }

    /** Where the libraries were (or were to be) loaded from. */
    public static Source source() {
        return SOURCE;
    }

    /** A human-readable description of the libraries in use, for logs and error messages. */
    public static String description() {
        return DESCRIPTION;
    }

    /** Why the libraries could not be loaded, or {@code null} if they were. */
    public static Throwable loadFailure() {
        return LOAD_FAILURE;
    }

    /** Whether the loaded libibverbs is the project's software device (it exports {@code softrdma_*}). */
    public static boolean isSoftwareDevice() {
        return IBVERBS_LOOKUP.find("softrdma_object_count").isPresent();
    }

    static SymbolLookup ibverbs() {
        return IBVERBS_LOOKUP;
    }

    static SymbolLookup rdmacm() {
        return RDMACM_LOOKUP;
    }

    public static Optional<MemorySegment> findIbverbs(String name) {
        return IBVERBS_LOOKUP.find(name);
    }

    /** The message for a system without rdma-core's user-space libraries. */
    static String notInstalledMessage(String detail) {
        return "the RDMA libraries are not installed (" + detail + "): install rdma-core's user-space libraries"
                + " (Debian/Ubuntu: apt-get install libibverbs1 librdmacm1; RHEL/Fedora: dnf install"
                + " libibverbs librdmacm), or set -D" + LIBRARY_PATH_PROPERTY + "=" + BUNDLED
                + " to run on the bundled software RDMA device";
    }

    private static SymbolLookup loadFrom(Path directory, String library) {
        Path file = directory.resolve(library);
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException(file + " does not exist");
        }
        return SymbolLookup.libraryLookup(file, Arena.global());
    }

    private static void deleteExtracted(Path directory) {
        try {
            for (String library : new String[] {IBVERBS, RDMACM}) {
                Files.deleteIfExists(directory.resolve(library));
            }
            Files.deleteIfExists(directory);
        } catch (IOException e) {
            // deleteOnExit still has them
        }
    }

    private static Path extractBundled() throws IOException {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (!os.startsWith("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new IOException("the bundled software RDMA device is built for linux-x86_64 only, this is "
                    + os + "-" + arch);
        }
        ClassLoader loader = NativeLibraries.class.getClassLoader();
        Path directory = Files.createTempDirectory("netty-rdma-softrdma-");
        directory.toFile().deleteOnExit();
        for (String library : new String[] {IBVERBS, RDMACM}) {
            String resource = BUNDLED_RESOURCE_DIR + library;
            try (InputStream in = loader == null ? ClassLoader.getSystemResourceAsStream(resource)
                    : loader.getResourceAsStream(resource)) {
                if (in == null) {
                    throw new IOException("the bundled software RDMA device is missing: no " + resource
                            + " on the class path (it is built by make -C native and packaged into the"
                            + " netty-transport-rdma jar)");
                }
                Path file = directory.resolve(library);
                file.toFile().deleteOnExit();
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            }
        }
        return directory;
    }
}
