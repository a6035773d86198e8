// The umbrella header: everything in weft's public API.
#pragma once

#include "weft/chan.hpp"
#include "weft/context.hpp"
#include "weft/net.hpp"
#include "weft/runtime.hpp"
#include "weft/select.hpp"
#include "weft/server.hpp"
#include "weft/sync.hpp"
#include "weft/task_group.hpp"
#include "weft/time.hpp"
#include "weft/tls.hpp"
