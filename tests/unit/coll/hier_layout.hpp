/* The layout of gpuwire/coll_hier.h for the hierarchical collectives' unit
 * tests (test_hier.cpp, test_hier_nb.cpp). */
#ifndef GPUWIRE_TESTS_UNIT_COLL_HIER_LAYOUT_HPP
#define GPUWIRE_TESTS_UNIT_COLL_HIER_LAYOUT_HPP

#include <map>
#include <vector>

#include "gpuwire/coll_hier.h"

namespace hiertest {

/* The layout of ranks on nodes labelled node[q]: the nodes numbered in the
 * order of their first rank (their leaders' order in the leaders'
 * communicator, which is split by communicator rank), ranks inside a node
 * in their communicator order. */
inline std::vector<int> where_of(const std::vector<int> &node)
{
    std::map<int, int> index, members;
    std::vector<int> where(2 * node.size());
    for (size_t q = 0; q < node.size(); ++q) {
        if (!index.count(node[q])) index[node[q]] = static_cast<int>(index.size());
        where[2 * q] = index[node[q]];
        where[2 * q + 1] = members[node[q]]++;
    }
    return where;
}

/* Rank r's rank in its node (GW_CE_HIER_NODE) or among the leaders. */
inline int level_rank(const std::vector<int> &where, int level, int r)
{
    return GW_CE_HIER_NODE == level ? where[2 * r + 1] : where[2 * r];
}

/* The ranks of node key (GW_CE_HIER_NODE), or the leaders, in rank order. */
inline std::vector<int> members(const std::vector<int> &where, int level, int key)
{
    std::vector<int> m;
    for (size_t q = 0; 2 * q < where.size(); ++q) {
        if (GW_CE_HIER_NODE == level ? where[2 * q] == key : 0 == where[2 * q + 1]) {
            m.push_back(static_cast<int>(q));
        }
    }
    return m;
}

} // namespace hiertest

#endif
