/*
 * A fake libnvidia-ml.so.1 for the tests of agent/devices/nvml.py.
 *
 * The real nvidia-ml-py bindings load it (pynvml.nvmlLib = ctypes.CDLL(path)) and call it as
 * they call NVIDIA's library: same versioned symbol names, same argument lists, same struct
 * layouts as nvml.h (and pynvml 13.615.71's ctypes mirrors of them), same return codes. Only
 * what the agent reads is here; anything else is missing, so pynvml raises FunctionNotFound.
 *
 * Built by the pytest fixture in tests/unit/devices/conftest.py:
 *     gcc -shared -fPIC -O1 -o libnvidia-ml.so.1 fake_nvml.c
 *
 * Configured without recompiling: at the first init of a session (init count 0 -> 1) it reads
 * the file named by $FAKE_NVML_CONFIG, lines of key=value ('#' starts a comment):
 *
 *   gpu_count=2                      driver_version=550.54.15    cuda_version=12040
 *   fail.<symbol>=<code>             a global call returns <code> (e.g. fail.nvmlInitWithFlags=9)
 *   gpu.<i>.uuid= name= memory_mib= pci= index=
 *   gpu.<i>.lost=1                   every query on the device returns GPU_IS_LOST (15); handle
 *                                    lookups still work, as on a real node
 *   gpu.<i>.fail.<symbol>=<code>     that call on that device returns <code>
 *   gpu.<i>.ecc_volatile= ecc_aggregate=             uncorrected ECC error counters
 *   gpu.<i>.remap_corrected= remap_uncorrected= remap_pending= remap_failure=
 *   gpu.<i>.fabric_state=3           fabric info present (absent: NOT_SUPPORTED); with
 *   gpu.<i>.fabric_cluster=<32 hex digits, dashes allowed> fabric_clique= fabric_status=
 *   gpu.<i>.mig_mode=1 mig_pending= mig_max=7
 *   gpu.<i>.mig.<j>.uuid= name= memory_mib= gi_slices= ci_slices= lost= fail.<symbol>=
 *                                    a MIG device in slot j (a slot without a uuid is empty)
 *
 * No $FAKE_NVML_CONFIG: a node with no GPUs. An unreadable file: init returns UNKNOWN (999).
 *
 * Two test hooks that are not NVML: fakeNvmlOpenSessions() (inits not yet shut down) and
 * fakeNvmlForget() (drop them, so the next init reads the configuration again).
 */

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 16
#define MAX_MIGS 8
#define MAX_FAILS 16
#define TEXT 96
#define MIB (1024ULL * 1024ULL)

/* ---- nvml.h layouts (pynvml 13.615.71 mirrors them in ctypes) ---- */

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 0x02000028u

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

/* nvml.h declares the state as an unsigned char; pynvml reads it as a c_uint. */
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
#define nvmlGpuFabricInfo_v2 0x02000024u

typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount,
        computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

/* ---- the fake node ---- */

struct fail {
    char symbol[64];
    int code;
};

struct fails {
    struct fail entries[MAX_FAILS];
    int count;
};

typedef struct device {
    int present, is_mig, lost;
    struct device *parent;
    char uuid[TEXT], name[TEXT], pci[32];
    unsigned long long memory;
    unsigned int index;
    struct fails fails;
    /* full GPUs */
    unsigned int mig_mode, mig_pending, mig_max;
    unsigned long long ecc_volatile, ecc_aggregate;
    unsigned int remap_corrected, remap_uncorrected, remap_pending, remap_failure;
    int fabric;
    unsigned char cluster[16];
    unsigned int clique, fabric_state;
    int fabric_status;
    /* MIG devices */
    unsigned int gi_slices, ci_slices;
} *nvmlDevice_t;

static struct {
    int inits;
    unsigned int count;
    char driver[80];
    int cuda;
    struct fails fails;
    struct device gpus[MAX_GPUS];
    struct device migs[MAX_GPUS][MAX_MIGS];
} node;

static void copy_text(char *to, size_t size, const char *from) {
    snprintf(to, size, "%s", from);
}

static void reset(void) {
    memset(&node, 0, sizeof node);
    copy_text(node.driver, sizeof node.driver, "550.54.15");
    node.cuda = 12040;
    for (int i = 0; i < MAX_GPUS; i++) {
        struct device *gpu = &node.gpus[i];
        snprintf(gpu->uuid, TEXT, "GPU-00000000-0000-0000-0000-0000000000%02d", i);
        copy_text(gpu->name, TEXT, "NVIDIA H100 80GB HBM3");
        snprintf(gpu->pci, sizeof gpu->pci, "00000000:%02X:00.0", 0x17 + i);
        gpu->memory = 81559 * MIB;
        gpu->index = (unsigned int)i;
        gpu->mig_max = 7;
        gpu->gi_slices = gpu->ci_slices = 7;
        for (int j = 0; j < MAX_MIGS; j++) {
            node.migs[i][j].is_mig = 1;
            node.migs[i][j].parent = gpu;
        }
    }
}

/* ---- configuration ---- */

static void add_fail(struct fails *fails, const char *symbol, const char *value) {
    if (fails->count == MAX_FAILS)
        return;
    struct fail *entry = &fails->entries[fails->count++];
    copy_text(entry->symbol, sizeof entry->symbol, symbol);
    entry->code = atoi(value);
}

static int fail_code(const struct fails *fails, const char *symbol) {
    for (int i = 0; i < fails->count; i++)
        if (strcmp(fails->entries[i].symbol, symbol) == 0)
            return fails->entries[i].code;
    return NVML_SUCCESS;
}

static void parse_cluster(unsigned char *cluster, const char *text) {
    int n = 0;
    for (const char *p = text; *p && n < 32; p++) {
        if (!isxdigit((unsigned char)*p))
            continue;
        int digit = isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10;
        cluster[n / 2] = (unsigned char)(n % 2 ? cluster[n / 2] | digit : digit << 4);
        n++;
    }
}

static unsigned long long number(const char *value) { return strtoull(value, NULL, 0); }

/* A key both GPUs and MIG devices have; 1 if it was one. */
static int set_common(struct device *dev, const char *key, const char *value) {
    if (strcmp(key, "uuid") == 0) {
        copy_text(dev->uuid, TEXT, value);
        dev->present = dev->is_mig ? value[0] != '\0' : dev->present;
    } else if (strcmp(key, "name") == 0)
        copy_text(dev->name, TEXT, value);
    else if (strcmp(key, "memory_mib") == 0)
        dev->memory = number(value) * MIB;
    else if (strcmp(key, "lost") == 0)
        dev->lost = (int)number(value);
    else if (strncmp(key, "fail.", 5) == 0)
        add_fail(&dev->fails, key + 5, value);
    else if (strcmp(key, "gi_slices") == 0)
        dev->gi_slices = (unsigned int)number(value);
    else if (strcmp(key, "ci_slices") == 0)
        dev->ci_slices = (unsigned int)number(value);
    else
        return 0;
    return 1;
}

static void set_gpu(struct device *gpu, const char *key, const char *value) {
    if (set_common(gpu, key, value))
        return;
    unsigned long long n = number(value);
    if (strcmp(key, "pci") == 0)
        copy_text(gpu->pci, sizeof gpu->pci, value);
    else if (strcmp(key, "index") == 0)
        gpu->index = (unsigned int)n;
    else if (strcmp(key, "ecc_volatile") == 0)
        gpu->ecc_volatile = n;
    else if (strcmp(key, "ecc_aggregate") == 0)
        gpu->ecc_aggregate = n;
    else if (strcmp(key, "remap_corrected") == 0)
        gpu->remap_corrected = (unsigned int)n;
    else if (strcmp(key, "remap_uncorrected") == 0)
        gpu->remap_uncorrected = (unsigned int)n;
    else if (strcmp(key, "remap_pending") == 0)
        gpu->remap_pending = (unsigned int)n;
    else if (strcmp(key, "remap_failure") == 0)
        gpu->remap_failure = (unsigned int)n;
    else if (strcmp(key, "fabric_state") == 0) {
        gpu->fabric = 1;
        gpu->fabric_state = (unsigned int)n;
    } else if (strcmp(key, "fabric_cluster") == 0)
        parse_cluster(gpu->cluster, value);
    else if (strcmp(key, "fabric_clique") == 0)
        gpu->clique = (unsigned int)n;
    else if (strcmp(key, "fabric_status") == 0)
        gpu->fabric_status = (int)n;
    else if (strcmp(key, "mig_mode") == 0)
        gpu->mig_mode = (unsigned int)n;
    else if (strcmp(key, "mig_pending") == 0)
        gpu->mig_pending = (unsigned int)n;
    else if (strcmp(key, "mig_max") == 0)
        gpu->mig_max = (unsigned int)n;
}

/* "gpu.<i>.<key>" or "gpu.<i>.mig.<j>.<key>" */
static void set_device(const char *rest, const char *value) {
    char *end;
    unsigned long i = strtoul(rest, &end, 10);
    if (*end != '.' || i >= MAX_GPUS)
        return;
    const char *key = end + 1;
    if (strncmp(key, "mig.", 4) != 0) {
        set_gpu(&node.gpus[i], key, value);
        return;
    }
    unsigned long j = strtoul(key + 4, &end, 10);
    if (*end == '.' && j < MAX_MIGS)
        set_common(&node.migs[i][j], end + 1, value);
}

static void set(const char *key, const char *value) {
    if (strcmp(key, "gpu_count") == 0)
        node.count = (unsigned int)number(value) > MAX_GPUS ? MAX_GPUS : (unsigned int)number(value);
    else if (strcmp(key, "driver_version") == 0)
        copy_text(node.driver, sizeof node.driver, value);
    else if (strcmp(key, "cuda_version") == 0)
        node.cuda = (int)number(value);
    else if (strncmp(key, "fail.", 5) == 0)
        add_fail(&node.fails, key + 5, value);
    else if (strncmp(key, "gpu.", 4) == 0)
        set_device(key + 4, value);
}

static char *trim(char *text) {
    while (isspace((unsigned char)*text))
        text++;
    char *end = text + strlen(text);
    while (end > text && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return text;
}

static nvmlReturn_t load(void) {
    reset();
    const char *path = getenv("FAKE_NVML_CONFIG");
    if (path == NULL || path[0] == '\0')
        return NVML_SUCCESS;
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return NVML_ERROR_UNKNOWN;
    char line[512];
    while (fgets(line, sizeof line, file)) {
        char *text = trim(line);
        char *equals = strchr(text, '=');
        if (text[0] == '#' || equals == NULL)
            continue;
        *equals = '\0';
        set(trim(text), trim(equals + 1));
    }
    fclose(file);
    for (unsigned int i = 0; i < node.count; i++)
        node.gpus[i].present = 1;
    return NVML_SUCCESS;
}

/* ---- checks every call makes, in NVML's order ---- */

static int known(nvmlDevice_t dev) {
    int gpu = dev >= &node.gpus[0] && dev < &node.gpus[MAX_GPUS];
    int mig = dev >= &node.migs[0][0] && dev < &node.migs[MAX_GPUS - 1][MAX_MIGS];
    return (gpu || mig) && dev->present && (!dev->is_mig || dev->parent->present);
}

static nvmlReturn_t global(const char *symbol) {
    if (!node.inits)
        return NVML_ERROR_UNINITIALIZED;
    return fail_code(&node.fails, symbol);
}

/* A device query. MIG handles answer only identity queries (mig_ok), as on real drivers. */
static nvmlReturn_t query(nvmlDevice_t dev, const char *symbol, int mig_ok) {
    if (!node.inits)
        return NVML_ERROR_UNINITIALIZED;
    if (!known(dev) || (dev->is_mig && !mig_ok))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (dev->lost || (dev->is_mig && dev->parent->lost))
        return NVML_ERROR_GPU_IS_LOST;
    return fail_code(&dev->fails, symbol);
}

/* A handle lookup: works on lost GPUs too, fails only where configured. */
static nvmlReturn_t lookup(nvmlDevice_t dev, const char *symbol) {
    nvmlReturn_t rc = global(symbol);
    return rc ? rc : fail_code(&dev->fails, symbol);
}

static nvmlReturn_t text_out(char *to, unsigned int length, const char *from) {
    if (to == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(from) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    copy_text(to, length, from);
    return NVML_SUCCESS;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        nvmlReturn_t rc_ = (call);                                                                 \
        if (rc_ != NVML_SUCCESS)                                                                   \
            return rc_;                                                                            \
    } while (0)

/* ---- the library ---- */

static nvmlReturn_t init(const char *symbol) {
    if (node.inits == 0)
        CHECK(load());
    CHECK(fail_code(&node.fails, symbol));
    node.inits++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return init("nvmlInitWithFlags");
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return init("nvmlInit_v2"); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    CHECK(global("nvmlShutdown"));
    node.inits--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    CHECK(global("nvmlSystemGetDriverVersion"));
    return text_out(version, length, node.driver);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    CHECK(global("nvmlSystemGetCudaDriverVersion"));
    *version = node.cuda;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    CHECK(global("nvmlSystemGetCudaDriverVersion_v2"));
    *version = node.cuda;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    CHECK(global("nvmlDeviceGetCount_v2"));
    *count = node.count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    CHECK(global("nvmlDeviceGetHandleByIndex_v2"));
    if (index >= node.count || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    CHECK(lookup(&node.gpus[index], "nvmlDeviceGetHandleByIndex_v2"));
    *device = &node.gpus[index];
    return NVML_SUCCESS;
}

static nvmlDevice_t find_uuid(const char *uuid) {
    for (unsigned int i = 0; i < node.count; i++) {
        if (strcmp(node.gpus[i].uuid, uuid) == 0)
            return &node.gpus[i];
        for (int j = 0; j < MAX_MIGS; j++)
            if (node.migs[i][j].present && strcmp(node.migs[i][j].uuid, uuid) == 0)
                return &node.migs[i][j];
    }
    return NULL;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    CHECK(global("nvmlDeviceGetHandleByUUID"));
    if (uuid == NULL || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlDevice_t found = find_uuid(uuid);
    if (found == NULL)
        return NVML_ERROR_NOT_FOUND;
    CHECK(lookup(found, "nvmlDeviceGetHandleByUUID"));
    *device = found;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length) {
    CHECK(query(dev, "nvmlDeviceGetUUID", 1));
    return text_out(uuid, length, dev->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length) {
    CHECK(query(dev, "nvmlDeviceGetName", 1));
    return text_out(name, length, dev->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *memory) {
    CHECK(query(dev, "nvmlDeviceGetMemoryInfo", 1));
    memory->total = dev->memory;
    memory->used = 0;
    memory->free = dev->memory;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *memory) {
    CHECK(query(dev, "nvmlDeviceGetMemoryInfo_v2", 1));
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = dev->memory;
    memory->reserved = 0;
    memory->used = 0;
    memory->free = dev->memory;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    CHECK(query(dev, "nvmlDeviceGetPciInfo_v3", 0));
    unsigned int domain = 0, bus = 0, device = 0;
    sscanf(dev->pci, "%x:%x:%x", &domain, &bus, &device);
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain, bus, device);
    copy_text(pci->busId, sizeof pci->busId, dev->pci);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = 0x233010DE;
    pci->pciSubSystemId = 0x16C110DE;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned int *index) {
    CHECK(query(dev, "nvmlDeviceGetIndex", 0));
    *index = dev->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int errorType, int counterType,
                                                unsigned long long *count) {
    CHECK(query(dev, "nvmlDeviceGetTotalEccErrors", 0));
    /* NVML_MEMORY_ERROR_TYPE_CORRECTED 0 / UNCORRECTED 1; NVML_VOLATILE_ECC 0 / AGGREGATE 1 */
    if (errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (errorType == 0)
        *count = 0;
    else
        *count = counterType == 0 ? dev->ecc_volatile : dev->ecc_aggregate;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corrected,
                                              unsigned int *uncorrected, unsigned int *pending,
                                              unsigned int *failure) {
    CHECK(query(dev, "nvmlDeviceGetRemappedRows", 0));
    *corrected = dev->remap_corrected;
    *uncorrected = dev->remap_uncorrected;
    *pending = dev->remap_pending;
    *failure = dev->remap_failure;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t dev, nvmlGpuFabricInfo_v2_t *info) {
    CHECK(query(dev, "nvmlDeviceGetGpuFabricInfoV", 0));
    if (info == NULL || info->version != nvmlGpuFabricInfo_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!dev->fabric)
        return NVML_ERROR_NOT_SUPPORTED;
    memcpy(info->clusterUuid, dev->cluster, sizeof info->clusterUuid);
    info->status = dev->fabric_status;
    info->cliqueId = dev->clique;
    info->state = (unsigned char)dev->fabric_state;
    /* The padding after the one-byte state is not the driver's to clear either: a reader that
       takes the state as a 4-byte integer (pynvml does) must mask it. */
    memset((char *)info + offsetof(nvmlGpuFabricInfo_v2_t, state) + 1, 0xA5,
           offsetof(nvmlGpuFabricInfo_v2_t, healthMask) - offsetof(nvmlGpuFabricInfo_v2_t, state) - 1);
    info->healthMask = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *current,
                                         unsigned int *pending) {
    CHECK(query(dev, "nvmlDeviceGetMigMode", 0));
    *current = dev->mig_mode;
    *pending = dev->mig_pending;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *count) {
    CHECK(query(dev, "nvmlDeviceGetMaxMigDeviceCount", 0));
    *count = dev->mig_max > MAX_MIGS ? MAX_MIGS : dev->mig_max;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                        nvmlDevice_t *mig) {
    CHECK(query(dev, "nvmlDeviceGetMigDeviceHandleByIndex", 0));
    if (!dev->mig_mode || index >= MAX_MIGS || index >= dev->mig_max)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlDevice_t slot = &node.migs[dev - node.gpus][index];
    if (!slot->present)
        return NVML_ERROR_NOT_FOUND;
    *mig = slot;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig,
                                                                 nvmlDevice_t *device) {
    CHECK(query(mig, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", 1));
    if (!mig->is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = mig->parent;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned int *is_mig) {
    CHECK(query(dev, "nvmlDeviceIsMigDeviceHandle", 1));
    *is_mig = (unsigned int)dev->is_mig;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t dev, nvmlDeviceAttributes_t *attributes) {
    CHECK(query(dev, "nvmlDeviceGetAttributes_v2", 1));
    memset(attributes, 0, sizeof *attributes);
    attributes->gpuInstanceSliceCount = dev->gi_slices;
    attributes->computeInstanceSliceCount = dev->ci_slices;
    attributes->multiprocessorCount = 132 * dev->ci_slices / 7;
    attributes->memorySizeMB = dev->memory / MIB;
    return NVML_SUCCESS;
}

/* ---- test hooks, not NVML ---- */

/* Open inits: every session the agent opens must be closed again. */
EXPORT int fakeNvmlOpenSessions(void) { return node.inits; }

/* Forget open sessions, so that the next init reads the configuration again. */
EXPORT void fakeNvmlForget(void) { node.inits = 0; }
